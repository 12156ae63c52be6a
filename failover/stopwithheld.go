package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The application's sends a recovery fence withholds when the application stops its QP. In
// WaitDrained the sends posted since the fence WR are written on the default QP with the
// doorbell withheld until the fence WR (the last application WR on the backup QP) and the
// recovery notification complete (recover.go). The application's ERR stops both QPs
// (appstop.go); the NIC flushes what was rung on them, but a WQE never rung is unknown to it
// and completed nowhere: a READ posted in WaitDrained waited for ever after the stop
// (simulation seed 29616, deep receive queues). A QP in ERR flushes every WR, in order: the
// withheld sends complete flushed once nothing up to the fence WR is outstanding on the
// backup QP, after every earlier WR's completion.

// stopFlush is what a stop took from a pending fence: the application's withheld sends,
// oldest first, and where the fence WR went.
type stopFlush struct {
	wrids []uint64
	old   *provider.QP // the QP the fence WR was posted on (the backup QP)
	pos   uint32       // the fence WR's position there
}

// takeWithheldLocked ends a pending fence for the application's stop and keeps its withheld
// sends for stopFlushDueLocked (q.mu held; takes q.scq.mu).
func (q *QP) takeWithheldLocked() {
	f := q.fn
	if f == nil {
		return
	}
	if s := f.State(); s != fence.Withholding && s != fence.Notifying {
		return
	}
	ws := f.Withheld(nil)
	fw := f.FenceWR()
	_ = f.Abort(fmt.Errorf("failover: QP %#x: stopped by the application", q.qpn))
	if len(ws) == 0 {
		return
	}
	sf := &stopFlush{old: f.Old(), pos: fw.Pos}
	for _, w := range ws {
		sf.wrids = append(sf.wrids, w.WRID)
	}
	q.scq.mu.Lock()
	q.stopFlush = sf
	q.stopFlushDueLocked(q.scq)
	q.scq.mu.Unlock()
	q.scq.raise()
}

// stopFlushDueLocked gives the application the flushes of the sends a stop took from the
// fence once nothing up to the fence WR is outstanding on the QP it went to (cq is q's send
// CQ, whose mutex the caller holds).
func (q *QP) stopFlushDueLocked(cq *CQ) {
	sf := q.stopFlush
	if sf == nil || cq != q.scq {
		return
	}
	for _, w := range sf.old.OutstandingSends(nil) {
		if int32(w.Pos-sf.pos) <= 0 {
			return // the fence WR, or a WR before it, has not completed yet
		}
	}
	q.stopFlush = nil
	for _, id := range sf.wrids {
		cq.pushLocked(verbs.WC{WRID: id, Status: verbs.WCWRFlushErr, QPNum: q.qpn})
	}
}
