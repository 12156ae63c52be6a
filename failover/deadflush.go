package failover

import "github.com/shift-rdma/shift/provider/verbs"

// A QP that fails on a dead default device (docs/FAILOVER.md "Dead NICs"). A refused fallback
// (an atomic or ineligible WR outstanding, the peer's refusal) hands the application the
// default QP's completions as they are, after moving it to ERR so that its WRs flush: a dead
// device writes no flush, and the application waited for ever for WRs it had posted (found
// by internal/sim with a default NIC killed while such a WR was outstanding). SHIFT knows
// the device is dead (defDead), so it completes them itself, as the flush would have: every
// send WR of the application still outstanding and every receive, with WR_FLUSH_ERR, in
// posting order.
//
// The device may also die, or hang, after the QP failed (the application's error, its Modify
// to ERR, a refused fallback): its flushes never come. Once SHIFT takes the device for dead
// (DEVICE_FATAL, or the watchdog, which watches such a QP while the application waits for its
// completions: watchPassLocked), fallBackAll completes what each of them still waits for
// (found by internal/sim: a QP the application moved to ERR on a default NIC that had hung
// before, 16 WRITEs never completed, seed 34 of the stop runs).

// flushDeadLocked completes the default QP's outstanding WRs with flush errors when the
// default device is dead, once. q.mu held, the QP failed (pass-through).
func (q *QP) flushDeadLocked() {
	if !q.c.defDead.Load() || q.deadFlushed {
		return
	}
	q.deadFlushed = true
	// What the device wrote before it died is the application's as it is: polled first, so
	// that it counts as completed below and is not completed a second time (simulation seed
	// 63454: a WRITE posted on the QP the application had stopped, flushed by the NIC just
	// before it died, completed twice). A dead device writes nothing more after this poll.
	q.pollDefaultCQsLocked()
	q.defOutstandingLocked()
	var sends []verbs.WC
	for _, w := range q.outSends {
		if w.Internal || w.Completed {
			continue // SHIFT's own WQEs, or one whose completion was polled already
		}
		sends = append(sends, verbs.WC{WRID: w.WRID, Status: verbs.WCWRFlushErr, QPNum: q.qpn})
	}
	var recvs []verbs.WC
	for _, r := range q.def.OutstandingRecvs(nil) {
		if r.WRID == ctrlWRID {
			continue // SHIFT's control RECV
		}
		recvs = append(recvs, verbs.WC{WRID: r.WRID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: q.qpn})
	}
	q.scq.mu.Lock()
	q.scq.buf = append(q.scq.buf, sends...)
	q.scq.mu.Unlock()
	q.rcq.mu.Lock()
	q.rcq.buf = append(q.rcq.buf, recvs...)
	q.rcq.mu.Unlock()
	q.scq.raise()
	q.rcq.raise()
}

// pollDefaultCQsLocked moves what the default CQs of q hold to their buffers, through the
// classifier (q.mu held).
func (q *QP) pollDefaultCQsLocked() {
	q.scq.pollDefault()
	if q.rcq != q.scq {
		q.rcq.pollDefault()
	}
}

// passingThroughLocked reports whether the default QP's completions go to the application as
// they are (defPassThrough: q failed on the default NIC). q.mu held.
func (q *QP) passingThroughLocked() bool {
	q.scq.mu.Lock()
	defer q.scq.mu.Unlock()
	return q.defMode == defPassThrough
}
