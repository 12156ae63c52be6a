package demo

import (
	"errors"

	"github.com/shift-rdma/shift/provider"
)

// ErrFailoverUnavailable is returned by the shift stack while package failover does not yet
// provide what the demo needs (a verbs surface over a default and a backup device).
var ErrFailoverUnavailable = errors.New("demo: failover not available yet")

// Side is one end of an RC connection as the workload uses it: a QP with its own CQ (send and
// receive completions on one CQ) and a registered buffer. Posting and polling follow the
// provider's rules: posts on one Side are serialised by the caller, as are polls.
type Side interface {
	PostSend(wrs []provider.SendWR) error
	PostRecv(wrs []provider.RecvWR) error
	Poll(wcs []provider.WC) (int, error)
	// Buf is the registered memory; LKey and RKey are its keys, Addr its first byte's
	// address (the remote address peers write to).
	Buf() []byte
	LKey() uint32
	RKey() uint32
	Addr() uint64
	// Endpoint is the connection record the peer needs.
	Endpoint() provider.Endpoint
	// Connect moves the QP to RTS towards remote.
	Connect(remote provider.Endpoint) error
	Close() error
}

// Stack opens Sides on the emulated hosts. Open(host, size) makes a Side on host's default
// NIC (NIC 0) with a size-byte registered buffer.
type Stack interface {
	Name() string
	Open(host, size int) (Side, error)
	Close() error
}

// SideConfig is what every Side gets: queue sizes and the RC connection attributes.
type SideConfig struct {
	Cap  provider.QPCap
	Attr provider.ConnectAttr
	CQE  int
}
