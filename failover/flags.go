package failover

import "github.com/shift-rdma/shift/provider/verbs"

// SendIneligible marks a WR that must not be retransmitted on the backup NIC (for example
// because the application verifies its effect by other means). It is bit 30 of the send
// flags, a bit the provider never encodes: SHIFT clears it before posting. If such a WR is
// outstanding when its QP fails, the fallback is refused and the application gets the
// original error completion, as without SHIFT.
const SendIneligible verbs.SendFlags = 1 << 30

// as converts the interface a verbs constructor of package provider returns to the
// provider's concrete type, which SHIFT drives through the ring operations only it offers.
func as[T any](v any, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}
