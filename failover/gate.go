package failover

import (
	"runtime"
	"sync/atomic"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Gate values. A lock-free fast path holds its gate at gateBusy for the length of one call
// (CompareAndSwap open→busy on entry, Store open on exit). A fallback closes the gates
// (closeGate waits out a call inside) and every call then takes the mutexes; a recovery reopens
// them once nothing of SHIFT's is left that only the slow path handles (reopenLocked,
// reopenCQLocked). The QPs' post gates (postgate.go) keep the same states but mark a call
// inside in a word of its own, so that a post needs no locked instruction; the CQs' gates
// keep the compare-and-swap, which also keeps two threads polling one CQ off its ring at
// once.
//
// Memory ordering: every write the slow path made under the mutexes before a reopen's Store
// of gateOpen happens before the next fast call's successful CompareAndSwap (the atomics are
// sequentially consistent), and every write of a fast call before its Store of gateOpen
// happens before the CompareAndSwap that closes the gate. The fast path and the slow path
// therefore never touch the poller- and poster-owned fields (logs, cursors, counters, the
// provider's rings) at the same time, and each sees the other's last writes.
const (
	gateOpen   = 0
	gateBusy   = 1
	gateClosed = 2
)

// closeGate waits until no fast-path call is inside and closes the gate.
func closeGate(g *atomic.Uint32) {
	for {
		switch g.Load() {
		case gateClosed:
			return
		case gateOpen:
			if g.CompareAndSwap(gateOpen, gateClosed) {
				return
			}
		}
		runtime.Gosched()
	}
}

// reopenGate opens a closed gate (no fast call can be inside a closed gate).
func reopenGate(g *atomic.Uint32) bool { return g.CompareAndSwap(gateClosed, gateOpen) }

// markSlowLocked takes q off the fast path (q.mu held): it is counted in its CQs' slow
// (under their mutexes, so no reopenCQLocked can run between the count and the close), then
// every gate it uses is closed. From here until reopenLocked, PostSend, PostRecv and Poll of
// q take the mutexes.
func (q *QP) markSlowLocked() {
	if !q.slow {
		q.slow = true
		for _, cq := range q.cqs() {
			cq.mu.Lock()
			cq.slow++
			cq.mu.Unlock()
		}
	}
	closePostGates(&q.sendGate, &q.recvGate)
	closeGate(q.scq.gate)
	closeGate(q.rcq.gate)
}

// unmarkSlowLocked ends q's count in its CQs' slow (q.mu held).
func (q *QP) unmarkSlowLocked() {
	if !q.slow {
		return
	}
	q.slow = false
	for _, cq := range q.cqs() {
		cq.mu.Lock()
		cq.slow--
		cq.mu.Unlock()
	}
}

// cqs is q's CQs, each once.
func (q *QP) cqs() []*CQ {
	if q.rcq == q.scq {
		return []*CQ{q.scq}
	}
	return []*CQ{q.scq, q.rcq}
}

// reopenLocked puts q's send side back on the fast path after a recovery (q.mu held), if nothing is left
// that only the slow path handles:
//   - both sides are Default, no handshake reply is awaited, no switch pins the QP to the
//     backup, no failure is queued, nothing waits in pending, nothing is held;
//   - the fence is finished (Done: the fence WR, the recovery notification and every withheld
//     WR were rung, the notification's completion was classified) or was never used;
//   - the default QP is in RTS and every WQE it holds is the application's: the probe's and
//     the notification's completions were consumed, and so was the control RECV (the peer's
//     recovery notification, which moved the receive side back). The position-tracking FIFOs
//     then hold only kindApp entries, which the fast path accounts exactly as the classifier
//     of a never-failed QP does (defLive): they are dropped with the mode change;
//   - the backup QP has no application WQE left without a consumed completion: its sends all
//     completed before the fence WR did (one SQ, in order), its receives were moved back and
//     those left on its RQ are stale (consumed by the peer's fillers at the next fallback,
//     which first takes q off the fast path again).
//
// The QP's own gates open here; the CQs' gates open at the next slow Poll that empties the WC
// buffer with no QP of the CQ left slow (reopenCQLocked): completions SHIFT buffered must be
// returned before the fast path returns newer ones.
func (q *QP) reopenLocked() bool {
	if !q.slow || q.destroyed || q.mach.pinState().local() || q.mach.roundState() != RoundIdle || len(q.pending) > 0 {
		return false
	}
	if q.mach.holdState() == HoldPosts || q.rHeld > 0 {
		// What a round held is not posted yet (flushHeld, queued on the engine, posts it
		// and comes back here): the application's next post would overtake it, and post on
		// a ring flushHeld writes (a data race, TestNoReopenWhileHeld).
		return false
	}
	if q.mach.sendState() != SendDefault || q.mach.recvState() != RecvDefault {
		return false
	}
	if q.fn != nil && q.fn.State() != fence.Done && q.fn.State() != fence.Idle {
		return false
	}
	if s := q.def.State(); s != verbs.QPStateRTS && !(s == verbs.QPStateRTR && q.recvOnly()) {
		return false
	}
	q.scq.mu.Lock()
	if q.rcq != q.scq {
		q.rcq.mu.Lock()
	}
	ok := false
	q.fifoMu.Lock()
	if bs := q.cs(); !q.failQueued && !bs.failQueued && allApp(q.dSendKinds) && allApp(q.dRecvKinds) && len(bs.sendKinds) == 0 {
		ok = true
		q.dSendKinds = q.dSendKinds[:0]
		q.dRecvKinds = q.dRecvKinds[:0]
		q.defMode = defLive
	}
	q.fifoMu.Unlock()
	if q.rcq != q.scq {
		q.rcq.mu.Unlock()
	}
	q.scq.mu.Unlock()
	if !ok {
		return false
	}
	q.tracked = false
	q.unmarkSlowLocked()
	// The gates were closed by markSlowLocked and only this function opens them, under q.mu
	// (or the inbox's drain, when WRs it holds kept one closed: inbox.go).
	if q.gateMayOpen(&q.sendGate) {
		q.openSendLocked() // closed still while an injection is armed for q (injgate.go)
	}
	if q.gateMayOpen(&q.recvGate) {
		q.recvGate.reopen()
	}
	q.c.fastReopens.Add(1)
	return true
}

func allApp(ks []uint8) bool {
	for _, k := range ks {
		if k != kindApp {
			return false
		}
	}
	return true
}

// holdCQRings keeps every poller off q's CQs' rings until the returned function runs: the
// slow path by the CQs' mutexes, the fast path by taking each open gate as one of its calls
// would (a closed gate sends pollers to the mutexes). For the provider's destroy, which
// removes q's completions from the rings (rdma-core's mlx5_destroy_qp holds both CQ locks
// for the same reason): the engine's drains of another QP on a shared CQ, or the
// application's Poll on another thread, would otherwise read the ring while it is rewritten.
// A fast Poll inside the gate that finds a failure closes the gate before it takes the
// mutex, so the wait below ends.
func (q *QP) holdCQRings() (release func()) {
	cqs := q.cqs()
	for _, cq := range cqs {
		cq.mu.Lock()
	}
	var held []*atomic.Uint32
	for _, cq := range cqs {
		for {
			v := cq.gate.Load()
			if v == gateClosed {
				break
			}
			if v == gateOpen && cq.gate.CompareAndSwap(gateOpen, gateBusy) {
				held = append(held, cq.gate)
				break
			}
			runtime.Gosched()
		}
	}
	return func() {
		for _, g := range held {
			g.Store(gateOpen)
		}
		for i := len(cqs) - 1; i >= 0; i-- {
			cqs[i].mu.Unlock()
		}
	}
}
