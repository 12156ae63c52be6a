package failover

import "github.com/shift-rdma/shift/provider"

// SendIneligible marks a WR that must not be retransmitted on the backup NIC (for example
// because the application verifies its effect by other means). It is the provider's
// SendMark (bit 30 of the send flags): never encoded in the WQE, recorded beside it, so a
// fallback reading the default ring back still sees it. If such a WR is outstanding when its
// QP fails, the fallback is refused and the application gets the original error
// completion, as without SHIFT.
const SendIneligible = provider.SendMark

// as converts the interface a verbs constructor of package provider returns to the
// provider's concrete type, which SHIFT drives through the ring operations only it offers.
func as[T any](v any, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}
