package failover

import "fmt"

// debugState describes q's internals for a failing test's message.
func (q *QP) debugState() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.scq.mu.Lock()
	if q.rcq != q.scq {
		q.rcq.mu.Lock()
	}
	q.fifoMu.Lock()
	s := fmt.Sprintf("QP %#x: slow %v tracked %v defMode %d round %v pin %v gen %d defFrom %d twoSided %d twoOff %d rPosted %d recvDone %d "+
		"backup %d recvKinds %v sendKinds %v bkLog %d dSendKinds %v dRecvKinds %v pending %d failQueued %v bkFailQueued %v gates s%d r%d cq%d/%d buf %d",
		q.qpn, q.slow, q.tracked, q.defMode, q.mach.roundState(), q.mach.pinState(), q.defGen.Load(), q.defFrom, q.twoSided, q.twoOff,
		q.rPosted.Load(), q.recvDone, q.cur.Load(), q.cs().recvKinds, q.cs().sendKinds, len(q.bkLog), q.dSendKinds, q.dRecvKinds, len(q.pending), q.failQueued, q.cs().failQueued,
		q.sendGate.state.Load(), q.recvGate.state.Load(), q.scq.gate.Load(), q.rcq.gate.Load(), len(q.rcq.buf)-q.rcq.head)
	q.fifoMu.Unlock()
	if q.rcq != q.scq {
		q.rcq.mu.Unlock()
	}
	q.scq.mu.Unlock()
	s += fmt.Sprintf(" def out sends %d recvs %d", len(q.def.OutstandingSends(nil)), len(q.def.OutstandingRecvs(nil)))
	if b := q.cs().qp.Load(); b != nil {
		s += fmt.Sprintf(" bk out sends %d recvs %d", len(b.OutstandingSends(nil)), len(b.OutstandingRecvs(nil)))
	}
	return s
}
