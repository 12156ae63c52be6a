package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Error completions SHIFT makes for WRs that come after others still outstanding on the
// backup QP. A QP in ERR flushes every WR in order; when a QP fails with WRs on two QPs, the
// backup's (posted first) complete through the backup CQ as its NIC writes them, and the
// completions SHIFT makes for the later ones wait until every WR of the backup log was
// reported:
//
//   - The application's stop in WaitDrained (appstop.go). The sends posted since the fence WR
//     (the last application WR on the backup QP) are written on the default QP with the
//     doorbell withheld (recover.go). The NIC flushes what was rung; a WQE never rung is
//     unknown to it and completed nowhere: a READ posted in WaitDrained waited for ever after
//     the stop (simulation seed 29616, deep receive queues).
//   - A fallback that fails in Handshake (the peer refused it, failLocked). Its WRs read back
//     from the default ring completed at once, ahead of the flushes of WRs the QP had on the
//     backup before it came back to the default path: the application saw a WR's flush after
//     the error of a WR posted after it (simulation seed 66891, recovery).

// deferErrsLocked gives wcs to the application once every application WR on the backup set
// in use was reported (the backup log is empty: retireBkLog, retireBkLogTo), at once when
// it is already (q.mu held; takes q.scq.mu).
func (q *QP) deferErrsLocked(wcs []verbs.WC) {
	if len(wcs) == 0 {
		return
	}
	q.scq.mu.Lock()
	q.later = append(q.later, wcs...)
	q.laterDueLocked(q.scq)
	q.scq.mu.Unlock()
	q.scq.raise()
}

// laterDueLocked gives the application the deferred completions once the backup log is
// empty, or the set's device was taken for dead and SHIFT completed the log itself
// (bkdead.go). cq is q's send CQ, whose mutex the caller holds; it takes q.fifoMu.
func (q *QP) laterDueLocked(cq *CQ) {
	if cq != q.scq || len(q.later) == 0 { // q.later is q.scq's: not read under another CQ's mutex
		return
	}
	q.fifoMu.Lock()
	due := len(q.bkLog) == 0 || q.cs().deadFlushed
	q.fifoMu.Unlock()
	if !due {
		return
	}
	cq.buf = append(cq.buf, q.later...)
	q.later = nil
}

// takeWithheldLocked ends a pending fence for the application's stop and gives its withheld
// sends their flushes once the fence WR and everything before it was reported (q.mu held).
func (q *QP) takeWithheldLocked() {
	f := q.fn
	if f == nil {
		return
	}
	if s := f.State(); s != fence.Withholding && s != fence.Notifying {
		return
	}
	ws := f.Withheld(nil)
	_ = f.Abort(fmt.Errorf("failover: QP %#x: stopped by the application", q.qpn))
	wcs := make([]verbs.WC, 0, len(ws))
	for _, w := range ws {
		wcs = append(wcs, verbs.WC{WRID: w.WRID, Status: verbs.WCWRFlushErr, QPNum: q.qpn})
	}
	q.deferErrsLocked(wcs)
}
