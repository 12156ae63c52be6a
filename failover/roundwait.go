package failover

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Rounds that wait (issue 12 §5). A fallback round waits for completions a NIC owes SHIFT:
// the flushes of the default QP it moved to ERR (drainLocked, resetDefaultLocked), those of
// a failed backup set (drainSetLocked), a free slot on the backup SQ (withRoomLocked). Each
// pacer wait runs with q.mu released (pauseLocked): the application's slow path takes q.mu,
// and would otherwise stall for the whole wait.
//
// Why release and re-validate rather than a round cut into steps that re-queue their
// continuation on the engine: the round stays on the engine goroutine, so no other
// transition (of this QP or any other) interleaves with it, and the only callers that can
// take q.mu meanwhile are the application's posts, Destroy and read-only accessors. Posts
// are held (below), and after every wait the round checks that the QP still exists and the
// context is not closing; nothing else can have changed the state it reads. Resumable steps
// would need each wait point of roundLocked, prepareLocked, repostSendsLocked, chainLocked
// and resetDefaultLocked written as an explicit state that every other transition must
// respect while it is half done. The cost: while one QP waits, the engine does too (other
// QPs' transitions queue behind it, as they did).
//
// Held posts. While a round has released q.mu, where a WR belongs is not settled (the
// default QP is in ERR, the set in use may have changed, the receives have not moved yet),
// so the application's slow-path posts are queued, never posted: sends in q.pending, which
// every round that reposts posts last (the handshake keeps the WRs posted meanwhile there
// already); receives in the receive log (rPosted advanced) without a post, counted in
// rHeld, so that the transitions that move the log's tail [recvDone, rPosted) (prepareLocked,
// recoverRecv) post them in order with the older ones. The hold lasts until flushHeld runs
// on the engine, queued when the hold began, so after the round that waited: it posts what
// is still held where the state then says, in order. A held post that the state then
// refuses (the QP failed meanwhile) completes with an error instead of failing the call,
// which had returned already.

// errRoundGone ends a round whose QP was destroyed, or whose context started closing, while
// the round waited with q.mu released: nothing of the QP may be touched any more.
var errRoundGone = errors.New("failover: QP destroyed or context closing during a fallback round")

// pauseLocked is one pacer wait of a round with q.mu released (q.mu held on entry and on
// return). It reports false when the round must stop (errRoundGone): the QP was destroyed,
// whose QPs and rings may be gone, or the context is closing.
func (q *QP) pauseLocked(p *pacer) bool {
	_ = q.mach.event(wordHold, EvHold)
	q.pauses++
	q.queueFlushLocked()
	q.mu.Unlock()
	p.wait()
	q.mu.Lock()
	q.pauses--
	// A flush that ran meanwhile (a round off the engine) left the hold in place for us.
	q.queueFlushLocked()
	if q.destroyed {
		return false
	}
	select {
	case <-q.c.quit:
		return false
	default:
		return true
	}
}

// queueFlushLocked queues flushHeld on the engine unless it is queued already.
func (q *QP) queueFlushLocked() {
	if q.flushQueued {
		return
	}
	q.flushQueued = true
	q.c.eng.do(q.flushHeld)
}

// flushHeld ends the hold: what the application posted while a round waited is posted where
// the state now says, in order (see above). A recovery that ran before it left the gates
// closed (reopenLocked): they open here once nothing is held.
func (q *QP) flushHeld() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushQueued = false
	if q.mach.holdState() != HoldPosts || q.pauses > 0 {
		return // nothing held, or a round still waits (it queues this again)
	}
	defer q.reopenLocked() // before the unlock: a no-op unless back on the default path
	_ = q.mach.event(wordHold, EvRelease)
	if q.destroyed {
		q.pending, q.rHeld = nil, 0
		return
	}
	if q.rHeld > 0 {
		p := q.rPosted.Load()
		recvs := make([]verbs.RecvWR, 0, q.rHeld)
		for i := p - q.rHeld; i < p; i++ {
			recvs = append(recvs, q.loggedRecv(i))
		}
		q.rHeld = 0
		if err := q.postLoggedRecvsLocked(recvs); err != nil {
			q.synthRecvErrorsLocked(recvs)
		}
	}
	// In Handshake the held sends stay where the handshake keeps its own: the reply reposts
	// them behind the old ones.
	if q.mach.sendState() == SendHandshake || len(q.pending) == 0 {
		return
	}
	recs := q.pending // keeps the inline payloads alive until posted
	ws := q.pendingWRs()
	q.pending = nil
	for i := range ws {
		// One at a time, waiting for room: a full SQ refuses a list part-way.
		err := q.withRoomLocked(func() error { return q.postSendLocked(ws[i : i+1]) })
		if errors.Is(err, errRoundGone) {
			return
		}
		if err != nil {
			q.synthErrorsLocked(ws[i:], verbs.WCWRFlushErr)
			return
		}
	}
	runtime.KeepAlive(recs)
}

// queueSendsLocked keeps wrs in q.pending. The records own copies of the SGLs and of the
// inline payloads: the application may reuse both as soon as its post returns, an inline
// WR's buffer included (the data is the WR's from then on), and these are posted later.
func (q *QP) queueSendsLocked(wrs []verbs.SendWR) {
	for _, w := range wrs {
		q.pending = append(q.pending, heldSend(w))
	}
}

// heldSend is a record of w, to be posted later, that owns copies of its SGL and inline
// payload.
func heldSend(w verbs.SendWR) sendRec {
	r := sendRec{wr: w}
	if w.Flags&verbs.SendInline != 0 {
		for _, s := range w.SGL {
			r.inline = append(r.inline, memAt(s.Addr, int(s.Length))...)
		}
		r.wr.SGL = nil
		if len(r.inline) > 0 {
			r.wr.SGL = []verbs.SGE{{Addr: sliceAddr(r.inline), Length: uint32(len(r.inline))}}
		}
	} else {
		r.wr.SGL = slices.Clone(w.SGL)
	}
	return r
}

// pendingWRs returns the WRs of q.pending (their records keep the inline payloads alive
// while q.pending holds them).
func (q *QP) pendingWRs() []verbs.SendWR {
	ws := make([]verbs.SendWR, len(q.pending))
	for i := range q.pending {
		ws[i] = q.pending[i].wr
	}
	return ws
}

// holdRecvsLocked logs wrs in the receive log without posting them (rHeld): the round's move
// of the log's tail, or flushHeld, posts them.
func (q *QP) holdRecvsLocked(wrs []verbs.RecvWR) error {
	p := q.rPosted.Load()
	q.rcq.mu.Lock()
	out := p - q.recvDone // recvDone is the poller's
	q.rcq.mu.Unlock()
	if out+uint64(len(wrs)) > uint64(q.cap.MaxRecvWR) {
		return fmt.Errorf("failover: post_recv on QP %#x: %w", q.qpn, verbs.ErrRQFull)
	}
	for i := range wrs {
		if len(wrs[i].SGL) > q.rstride {
			return &verbs.WRError{Op: "post_recv", Index: i, Limit: q.rstride, Got: len(wrs[i].SGL), Err: verbs.ErrTooManySGE}
		}
	}
	for i := range wrs {
		q.logRecv(p+uint64(i), &wrs[i])
	}
	q.rPosted.Store(p + uint64(len(wrs)))
	q.rHeld += uint64(len(wrs))
	return nil
}

// postLoggedRecvsLocked posts receives already in the receive log where the receive state
// says.
func (q *QP) postLoggedRecvsLocked(recvs []verbs.RecvWR) error {
	switch q.mach.recvState() {
	case RecvDefault:
		return q.postDefaultRecvsLocked(recvs, q.tracked)
	case RecvFallback:
		return q.postRecvBackupLocked(recvs)
	}
	if q.appErr {
		return q.def.PostRecv(recvs) // as without SHIFT
	}
	return fmt.Errorf("failover: post_recv on QP %#x: %w: %w", q.qpn, ErrFailed, verbs.ErrQPState)
}

// postDefaultRecvsLocked posts recvs on the default QP; with track their kinds go to the
// position-tracking FIFO first, and come off it again if the post fails.
func (q *QP) postDefaultRecvsLocked(recvs []verbs.RecvWR, track bool) error {
	if track {
		q.fifoMu.Lock()
		for range recvs {
			q.dRecvKinds = append(q.dRecvKinds, kindApp)
		}
		q.fifoMu.Unlock()
	}
	q.rcq.mu.Lock()
	err := q.def.PostRecv(recvs)
	q.rcq.mu.Unlock()
	if err != nil && track {
		q.fifoMu.Lock()
		q.dRecvKinds = q.dRecvKinds[:len(q.dRecvKinds)-len(recvs)]
		q.fifoMu.Unlock()
	}
	return err
}

// synthRecvErrorsLocked completes held receives that could not be posted with flush errors,
// as a QP in ERR completes its receives.
func (q *QP) synthRecvErrorsLocked(recvs []verbs.RecvWR) {
	q.rcq.mu.Lock()
	for _, r := range recvs {
		q.rcq.buf = append(q.rcq.buf, verbs.WC{WRID: r.WRID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: q.qpn})
	}
	closeGate(q.rcq.gate)
	q.rcq.mu.Unlock()
	q.rcq.raise()
}
