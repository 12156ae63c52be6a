package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// A READ outstanding at a fallback is read again on the backup (its response may have been
// lost), while a WR behind it that the peer had received is not sent again (the peer may
// already have acted on it: repostSendsLocked). Completing such a signaled WR at once would
// hand the application its completion before the READ's, which RC never does and which an
// application may take for the READ's data being in place. So a zero-length RDMA WRITE, which
// touches no memory, is posted on the backup in the WR's place: it completes in order behind
// the READ, and the classifier reports its completion as the WR's (kindHeld, heldOps).

// heldWR is the stand-in of r (signaled, delivered, behind a READ read again).
func heldWR(r *sendRec) *sendRec {
	return &sendRec{wr: verbs.SendWR{WRID: r.wr.WRID, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled},
		signaled: true, held: true, heldOp: wcOpcode(r.wr.Opcode)}
}

// postHeldLocked posts the stand-in r on the backup QP in use (q.mu held). It is logged as
// the zero-length WRITE it is: should this backup fail too, the next one runs the WRITE
// again, which is harmless, and its completion then reports RDMA_WRITE.
func (q *QP) postHeldLocked(r *sendRec) error {
	bs := q.cs()
	b := bs.qp.Load()
	wrs := []verbs.SendWR{r.wr}
	q.fifoMu.Lock()
	m := q.beginPush(bs)
	bs.sendKinds = append(bs.sendKinds, kindHeld)
	bs.heldOps = append(bs.heldOps, r.heldOp)
	q.logBackupFifo(wrs)
	q.endPush(bs, &m)
	q.fifoMu.Unlock()
	q.scq.mu.Lock()
	err := q.postTimedLocked(b, wrs) // only reposts come here
	q.scq.mu.Unlock()
	if err != nil {
		q.fifoMu.Lock()
		q.rollbackFifo(bs, m)
		q.fifoMu.Unlock()
		return fmt.Errorf("failover: post_send on backup of QP %#x: %w", q.qpn, err)
	}
	return nil
}
