package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The repost of paper C#1: the application's WQEs still in the default SQ (the failed one and
// those flushed or never executed behind it; the provider holds them, SetRetainSends) are
// read back and copied onto the backup SQ with keys and QPN rewritten. Nothing of the default
// path is logged; what a fallback needs of a WQE (its wr_id, whether it is SHIFT's own or
// ineligible, its place among the two-sided WRs) the provider records beside the ring.

// defSendsLocked returns, oldest first, the application's WQEs in the default SQ from
// defFrom on, read back as WRs (keys as the application posted them: those inject
// corrupted are restored). The gates are closed and the drain ran (q.mu held).
func (q *QP) defSendsLocked() ([]sendRec, error) {
	if q.destroyed {
		return nil, nil // its rings are gone (a handshake timer that fired during Destroy)
	}
	q.defOutstandingLocked()
	out := make([]sendRec, 0, len(q.outSends))
	for _, w := range q.outSends {
		if !q.repostableLocked(w) {
			continue
		}
		d, err := q.decodedLocked(w.Pos)
		if err != nil {
			return nil, err
		}
		r := sendRec{wr: d.wr, inline: d.inline, fromDef: true, pos: w.Pos, signaled: w.Signaled,
			twoSeq: w.TwoSeq + q.twoOff, twoSided: twoSided(d.wr.Opcode)}
		r.wr.WRID = w.WRID
		if w.Marked {
			r.wr.Flags |= SendIneligible
		}
		out = append(out, r)
	}
	return out, nil
}

// repostableLocked reports whether w, a WQE of the default ring, is still SHIFT's to repost:
// the application's, at or after defFrom.
func (q *QP) repostableLocked(w provider.SendWQE) bool {
	return !w.Internal && int32(w.Pos-q.defFrom) >= 0
}

// copyToBackupLocked reposts r, a WQE of the default SQ, on the backup QP in use: the WQE is
// copied with the backup QP's number and index, its local keys through the MR table and its
// remote key through the peer's entries (rewriteLocked resolves them first, so a key that
// does not map fails here, before anything is written), and rung. Like postBackupLocked it
// records the kind of a signaled WQE and logs the WR for the next backup.
func (q *QP) copyToBackupLocked(r *sendRec) error {
	bs := q.cs()
	b := bs.qp.Load()
	w, err := q.rewriteLocked(r.wr, new([]verbs.SGE))
	if err != nil {
		return fmt.Errorf("failover: repost on QP %#x: %w", q.qpn, err)
	}
	seg := 0
	rw := provider.WQERewrite{
		// Data segments come in gather-list order; inline data carries no key.
		LKey: func(uint32) uint32 { k := w.SGL[seg].LKey; seg++; return k },
		RKey: func(uint32) uint32 { return w.RKey },
	}
	q.fifoMu.Lock()
	m := q.beginPush(bs)
	if r.signaled {
		bs.sendKinds = append(bs.sendKinds, kindApp)
	}
	q.logBackupFifo([]verbs.SendWR{r.wr})
	q.endPush(bs, &m)
	q.fifoMu.Unlock()
	q.scq.mu.Lock()
	end, err := b.CopySendWQE(q.def, r.pos, rw)
	if err == nil {
		err = b.RingSendDoorbell(end)
	}
	q.scq.mu.Unlock()
	if err != nil {
		q.fifoMu.Lock()
		q.rollbackFifo(bs, m)
		q.fifoMu.Unlock()
		return fmt.Errorf("failover: repost on backup of QP %#x: %w", q.qpn, err)
	}
	return nil
}

// defOutstandingLocked reads the default SQ's outstanding WQEs into q.outSends under the send
// CQ's mutex: a fence releasing withheld WQEs (rung from the classifier, which holds that
// mutex) moves the SQ's rung position meanwhile.
func (q *QP) defOutstandingLocked() {
	q.scq.mu.Lock()
	q.outSends = q.def.OutstandingSends(q.outSends[:0])
	q.scq.mu.Unlock()
}
