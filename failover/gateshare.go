package failover

import (
	"runtime"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider/verbs"
)

// SendGateShare is what a poster outside Go (the plugin's C post_send) needs to post in the
// Default state as PostSend does: enter the QP's send gate, find it open, post on the default
// QP as the provider does (provider.SendShare), leave. Anything else (a closed gate, which an
// armed failure injection keeps closed too: injgate.go; a post the provider would refuse) is
// left to PostSend, before anything was written.
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
}

// GateOpen is the value of a gate's state word in which a post goes to the default QP (and a
// CQ's fast path may poll); GateBusy is a CQ gate's value while its fast-path poller is
// inside (CQ.ShareGate's word, taken from GateOpen by a compare-and-swap).
const (
	GateOpen = gateOpen
	GateBusy = gateBusy
)

// ShareSendGate describes the QP's send gate to a poster outside Go and pins, with p, the
// memory it points into (the QP); the caller unpins once the QP is destroyed. The default
// QP's send queue is described by q.Default().ShareSend.
func (q *QP) ShareSendGate(p *runtime.Pinner) SendGateShare {
	p.Pin(q)
	return SendGateShare{State: &q.sendGate.state, Busy: &q.sendGate.busy, Asymmetric: asymGates}
}

// RecvGateShare is SendGateShare for post_recv: in the Default state a receive list is
// logged (the receive log, from which a fallback reposts the outstanding receives) and posted
// on the default QP as the provider does (provider.RecvShare), behind the receive gate, by
// the same protocol. The poster refuses, leaving the list to PostRecv, a list longer than
// MaxRecvWR or a WR with more than Stride scatter entries.
type RecvGateShare struct {
	State      *atomic.Uint32
	Busy       *uint32
	Asymmetric bool
	MaxRecvWR  uint32
	// Log is the receive log (its length a power of two), SGE its scatter entries, Stride per
	// record; the receive at log position i goes to Log[i%len(Log)], its entries to
	// SGE[(i%len(Log))*Stride:]. Posted is the log's head: stored after the provider's post.
	Log    []RecvLogRecord
	SGE    []verbs.SGE
	Stride int
	Posted *atomic.Uint64
	// RecvDone counts the application's receives completed: the CQ's fast-path poller adds
	// one per receive completion it returns (its own while it holds the CQ's gate).
	RecvDone *uint64
}

// ShareRecvGate describes the QP's receive gate and log to a poster outside Go and pins, with
// p, the memory they point into; the caller unpins once the QP is destroyed.
func (q *QP) ShareRecvGate(p *runtime.Pinner) RecvGateShare {
	p.Pin(q)
	p.Pin(&q.rlog[0])
	p.Pin(&q.rsge[0])
	return RecvGateShare{State: &q.recvGate.state, Busy: &q.recvGate.busy, Asymmetric: asymGates,
		MaxRecvWR: q.cap.MaxRecvWR, Log: q.rlog, SGE: q.rsge, Stride: q.rstride, Posted: &q.rPosted,
		RecvDone: &q.recvDone}
}
