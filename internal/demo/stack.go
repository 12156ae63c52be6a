package demo

import (
	"context"

	"github.com/shift-rdma/shift/probe"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Side is one end of an RC connection as the workload uses it: a QP with its own CQ (send and
// receive completions on one CQ) and a registered buffer. Posting and polling follow the
// provider's rules: posts on one Side are serialised by the caller, as are polls.
type Side interface {
	PostSend(wrs []verbs.SendWR) error
	PostRecv(wrs []verbs.RecvWR) error
	Poll(wcs []verbs.WC) (int, error)
	// Buf is the registered memory; LKey and RKey are its keys, Addr its first byte's
	// address (the remote address peers write to).
	Buf() []byte
	LKey() uint32
	RKey() uint32
	Addr() uint64
	// Endpoint is the connection record the peer needs.
	Endpoint() verbs.Endpoint
	// Connect moves the QP to RTS towards remote.
	Connect(remote verbs.Endpoint) error
	// Close releases the Side; a second Close does nothing.
	Close() error
}

// Stack opens Sides on the emulated hosts. Open(host, size) makes a Side on host's default
// NIC (NIC 0) with a size-byte registered buffer. Ready returns once the connected Sides can
// carry traffic through a failure (the shift stack's shadow objects are in place). Close
// closes every Side the stack opened that is still open, in an order the stack chooses, then
// the stack itself.
type Stack interface {
	Name() string
	Open(host, size int) (Side, error)
	Ready(ctx context.Context) error
	// Summary is what the stack itself did during the run, for the report ("" if nothing
	// to say); it is called before Close.
	Summary() string
	Close() error
}

// SideConfig is what every Side gets: queue sizes and the RC connection attributes.
type SideConfig struct {
	Cap  verbs.QPCap
	Attr verbs.ConnectAttr
	CQE  int
	// LinkEvents, when set, is host h's default NIC's link events for the SHIFT stack
	// (failover.Options.LinkEvents).
	LinkEvents func(h int) <-chan probe.LinkEvent
}
