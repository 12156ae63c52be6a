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
// corrupted are restored). The gates are closed and the drain ran (q.mu held). The list is
// shared with the next call that finds the ring as it was (defsKept): callers read it.
func (q *QP) defSendsLocked() ([]sendRec, error) {
	if q.destroyed {
		return nil, nil // its rings are gone (a handshake timer that fired during Destroy)
	}
	q.defOutstandingLocked()
	k := q.defsKeyLocked()
	if q.defsKept.ok && q.defsKept.key == k {
		return q.defsKept.recs, nil
	}
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
	q.defsKept = defsKept{key: k, ok: true, recs: out}
	return out, nil
}

// defsKept is defSendsLocked's last list and the state of the ring it was read from. A
// fallback lists the ring for its retransmission check and again, after the reply, for its
// repost, with nothing changed in between: the gates are closed, the default QP stopped and
// its failed WQEs retained. Listing it again took 9–12 µs p50 of the reply's round with 64
// WRITEs outstanding (a temporary trace of 2026-11-30).
type defsKept struct {
	key  defsKey
	ok   bool
	recs []sendRec
}

// defsKey is what a list of the default ring's WQEs depends on: the SQ's incarnation, the
// first position SHIFT reposts from, the two-sided count's offset, and the outstanding WQEs
// (their number and first and last positions: the provider's tables do not change for a
// position while it is outstanding).
type defsKey struct {
	resets, from, twoOff, first, last uint32
	n                                 int
}

// defsKeyLocked is the ring's key now (q.outSends just listed).
func (q *QP) defsKeyLocked() defsKey {
	k := defsKey{resets: q.def.SendResets(), from: q.defFrom, twoOff: q.twoOff, n: len(q.outSends)}
	if k.n > 0 {
		k.first, k.last = q.outSends[0].Pos, q.outSends[k.n-1].Pos
	}
	return k
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
	q.cpSGE = q.cpSGE[:0] // read by CopySendWQE's callbacks only, during the call
	w, err := q.rewriteLocked(r.wr, &q.cpSGE)
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
		t0 := q.c.now()
		err = b.RingSendDoorbell(end)
		q.roundDeviceTime(&q.tPost, t0) // the doorbell: the emulated NIC runs there
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
