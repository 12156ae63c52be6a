package failover

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// sendGateOf returns q's send gate state and whether an injection keeps it closed.
func sendGateOf(q *QP) (state uint32, injClosed bool) {
	q.mu.Mutex.Lock()
	defer q.mu.Mutex.Unlock()
	return q.sendGate.state.Load(), q.injClosed
}

// An armed injection keeps the send gates of the QPs it may fall on closed, so that the fast
// post reads no injection word: the locked post counts the countdown down, and the gate
// opens again at the QP's first post once the injection is spent or disarmed. A QP created
// while an injection is armed for it starts closed; the openings of a recovery or of the
// inbox's drain (openSendLocked) leave it closed while armed.
func TestInjectionGate(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 2, smallCap)
	ha, hb := e.hosts[0], e.hosts[1]
	ctx := ha.ctx
	p := &poller{t: t, cq: ha.cq}
	seq := uint64(0)
	write := func(q *QP) {
		t.Helper()
		seq++
		wr := verbs.SendWR{WRID: seq, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}
		if err := q.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatalf("WRITE %d: %v", seq, err)
		}
		wcs := p.next(time.Now().Add(20 * time.Second))
		if len(wcs) != 1 || wcs[0].WRID != seq || wcs[0].Status != verbs.WCSuccess {
			t.Fatalf("WRITE %d: completions %+v", seq, wcs)
		}
	}
	expect := func(what string, q *QP, state uint32, injClosed bool) {
		t.Helper()
		if s, ic := sendGateOf(q); s != state || ic != injClosed {
			t.Fatalf("%s: QP %#x send gate %d, injClosed %v; want %d, %v", what, q.QPN(), s, ic, state, injClosed)
		}
	}
	write(a[0])
	write(a[1])
	expect("before", a[0], gateOpen, false)

	// One QP: only its gate closes; its posts count down, the other QP's do not.
	ctx.Inject(a[0].QPN(), 3)
	expect("armed", a[0], gateClosed, true)
	expect("armed for another QP", a[1], gateOpen, false)
	write(a[0])
	write(a[1])
	if n := ctx.injArmed.Load(); n != 2 {
		t.Fatalf("countdown %d after one post on the armed QP, want 2", n)
	}
	expect("counting", a[0], gateClosed, true)
	// Disarmed: the QP's next post opens the gate.
	ctx.Inject(a[0].QPN(), 0)
	expect("disarmed, not posted", a[0], gateClosed, true)
	write(a[0])
	expect("disarmed, posted", a[0], gateOpen, false)
	if !onFastPath(a[0]) {
		t.Fatal("not on the fast path after the disarm")
	}

	// Any QP: every gate closes, and a QP created while armed starts closed.
	ctx.Inject(0, 100)
	expect("armed for all", a[0], gateClosed, true)
	expect("armed for all", a[1], gateClosed, true)
	c, _ := e.pairs(t, 1, smallCap)
	expect("created while armed", c[0], gateClosed, true)
	write(c[0])
	if n := ctx.injArmed.Load(); n != 99 {
		t.Fatalf("countdown %d after a post on the new QP, want 99", n)
	}
	ctx.Inject(0, 0)
	for _, q := range []*QP{a[0], a[1], c[0]} {
		write(q)
		expect("disarmed for all, posted", q, gateOpen, false)
	}

	// The openings of a recovery and of the inbox's drain keep the gate closed while armed.
	ctx.Inject(a[1].QPN(), 100)
	a[1].mu.Lock()
	a[1].injClosed = false
	a[1].openSendLocked()
	a[1].mu.Unlock()
	expect("opened while armed", a[1], gateClosed, true)
	ctx.Inject(a[1].QPN(), 0)
	a[1].mu.Lock()
	a[1].openSendLocked()
	a[1].mu.Unlock()
	expect("opened once disarmed", a[1], gateOpen, false)
}
