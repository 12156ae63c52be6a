package failover

import (
	"runtime"
	"sync/atomic"
)

// SendGateShare is what a poster outside Go (the plugin's C post_send) needs to post in the
// Default state as PostSend does: enter the QP's send gate, find it open and no failure
// injection armed, post on the default QP as the provider does (provider.SendShare), leave.
// Anything else (a closed gate, an armed injection, a post the provider would refuse) is left
// to PostSend, before anything was written.
//
// The gate protocol (postgate.go), for a poster that is one at a time per QP as the
// application's posters are: store 1 in Busy, then load State; when Asymmetric, the store may
// be a plain one followed by a compiler barrier only (the closer makes every thread execute a
// barrier before it reads Busy), otherwise both must be sequentially consistent. Leave with
// a release store of 0 in Busy, after every store of the post.
type SendGateShare struct {
	State      *atomic.Uint32 // GateOpen: the default QP takes the post
	Busy       *uint32
	Asymmetric bool
	// Injection holds the address of the failure-injection countdown (nonzero: armed); the
	// word it points to is replaced when the context closes.
	Injection *atomic.Pointer[atomic.Int64]
}

// GateOpen is the value of SendGateShare.State in which a post goes to the default QP.
const GateOpen = gateOpen

// ShareSendGate describes the QP's send gate to a poster outside Go and pins, with p, the
// memory it points into (the QP and the context's own injection word); the caller unpins once
// the QP is destroyed. The default QP's send queue is described by q.Default().ShareSend.
func (q *QP) ShareSendGate(p *runtime.Pinner) SendGateShare {
	p.Pin(q)
	p.Pin(q.c) // the context's own injection word (injOwn), used when no file is mapped
	return SendGateShare{State: &q.sendGate.state, Busy: &q.sendGate.busy, Asymmetric: asymGates,
		Injection: &q.inj}
}
