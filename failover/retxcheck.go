package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// checkSendsLocked is a fallback's retransmission-safety check, made before the round
// notifies the peer so that a WR that must not be sent again fails the round closed, as
// without SHIFT: no atomic and no ineligible WR may be outstanding, and every key of every WR
// the round will repost must map to the backup (the default ring's WQEs and, after a backup
// failed, the backup log's). The default ring's WQEs are decoded into scratch, not kept:
// keeping them (defSendsLocked) is for the repost, which waits for the peer's reply anyway,
// and a pass that kept its decodes took 22–24 µs p50 of the round's own share before the
// notification with 64 WRITEs or SENDs outstanding (BenchmarkFallbackLatency, a temporary
// trace of 2026-11-30). Called with the gates closed, the default QP stopped and drained.
// The initiator of a round whose remote keys were all found good splits it around its
// notification instead (checkOpsLocked, checkKeptLocked).
func (q *QP) checkSendsLocked() error {
	if q.destroyed {
		return nil // its rings are gone
	}
	q.defOutstandingLocked()
	dev := q.cs().dev
	gen := dev.keyGen.Load() // before the keys are looked up: a change during the check voids it
	var scratch []verbs.SGE
	for _, w := range q.outSends {
		if !q.repostableLocked(w) {
			continue
		}
		d, ok := q.cachedDecodeLocked(w.Pos)
		if !ok {
			var err error
			if d, err = q.readDecodeLocked(w.Pos, q.sgeTailLocked()); err != nil {
				return err
			}
		}
		wr := d.wr
		wr.WRID = w.WRID
		if w.Marked {
			wr.Flags |= SendIneligible
		}
		scratch = scratch[:0]
		if err := q.retxSafeLocked(wr, &scratch); err != nil {
			return err
		}
	}
	q.keysOK = keysChecked{ok: true, dev: dev, gen: gen, ring: q.defsKeyLocked()}
	return q.checkChainLogLocked()
}

// checkChainLogLocked checks the keys of the backup log's WRs a chained round reposts.
func (q *QP) checkChainLogLocked() error {
	if q.mach.repostState() != RepostChain {
		return nil
	}
	var scratch []verbs.SGE
	for i := range q.bkLog {
		scratch = scratch[:0]
		if _, err := q.rewriteLocked(q.bkLog[i].wr, &scratch); err != nil {
			return fmt.Errorf("failover: QP %#x: %w", q.qpn, err)
		}
	}
	return nil
}

// checkOpsLocked is the part of the retransmission check that needs no WQE read back: no
// atomic and no ineligible WR outstanding (the provider's table of the ring names each WQE's
// opcode and mark), and the backup log's keys for a chained round. The initiator of a round
// whose key look-up found every remote key good (rkeysFirstLocked) makes only this check before it
// notifies, and the rest (checkKeptLocked) on the decode it keeps for the repost while the
// notification is on its way: decoding the ring for the check took 15–20 µs p50 of the
// round's share before the notification with 64 WQEs outstanding (a temporary trace of
// 2026-11-30, the first WQE's cold code and tables most of it). What is left to find then
// is a local key without a backup MR or an access outside the range the peer's entry
// describes, faults of the set-up and not of the WRs (withdrawLocked). It reports false when
// a WQE's opcode is none it knows: the whole check runs before the notification then.
func (q *QP) checkOpsLocked() (bool, error) {
	if q.destroyed {
		return true, nil // its rings are gone
	}
	q.defOutstandingLocked()
	for _, w := range q.outSends {
		if !q.repostableLocked(w) {
			continue
		}
		switch _, atomic, ok := w.Opcode.Segments(); {
		case !ok:
			return false, nil
		case atomic:
			return true, q.notSafeErr(w.Opcode, w.WRID)
		case w.Marked:
			return true, q.notSafeErr("ineligible WR", w.WRID)
		}
	}
	return true, q.checkChainLogLocked()
}

// checkKeptLocked is the rest of the check after checkOpsLocked, on the default ring's WQEs
// as decoded and kept for the repost (defs, defSendsLocked): every key must map.
func (q *QP) checkKeptLocked(defs []sendRec) error {
	dev := q.cs().dev
	gen := dev.keyGen.Load() // before the keys are looked up: a change during the check voids it
	var scratch []verbs.SGE
	for i := range defs {
		scratch = scratch[:0]
		if err := q.retxSafeLocked(defs[i].wr, &scratch); err != nil {
			return err
		}
	}
	q.keysOK = keysChecked{ok: true, dev: dev, gen: gen, ring: q.defsKeyLocked()}
	return nil
}

// keysChecked records a retransmission check that every key of the default ring's WQEs
// maps to dev (checkSendsLocked): while dev's keys are of generation gen and the ring holds
// the same WQEs (ring: defsKey), the reply's round need not look its keys up again
// (missingDefRKeysLocked), which took 3.4–6.5 µs p50 of it with 63 WQEs outstanding (a
// temporary trace of BenchmarkFallbackLatency, 2026-11-30).
type keysChecked struct {
	ok   bool
	dev  *backupDev
	gen  uint64
	ring defsKey
}

// keysStillCheckedLocked reports whether the last check's keys hold for the ring now
// (q.outSends just listed) on dev.
func (q *QP) keysStillCheckedLocked(dev *backupDev) bool {
	k := &q.keysOK
	return k.ok && k.dev == dev && k.gen == dev.keyGen.Load() && k.ring == q.defsKeyLocked()
}

// retxSafeLocked checks one WR of the default ring: not an atomic, not ineligible, and
// every key mapped (rewriteLocked, whose mapped gather list goes to *scratch).
func (q *QP) retxSafeLocked(wr verbs.SendWR, scratch *[]verbs.SGE) error {
	switch {
	case wr.Opcode == verbs.WRAtomicCmpAndSwp || wr.Opcode == verbs.WRAtomicFetchAdd:
		return q.notSafeErr(wr.Opcode, wr.WRID)
	case wr.Flags&SendIneligible != 0:
		return q.notSafeErr("ineligible WR", wr.WRID)
	}
	// Fail closed now rather than in the middle of reposting: every key must map.
	if _, err := q.rewriteLocked(wr, scratch); err != nil {
		return fmt.Errorf("failover: QP %#x: %w", q.qpn, err)
	}
	return nil
}

// notSafeErr is the error of a round refused for an outstanding WR that must not be sent
// again: what (its opcode, or why) and its wr_id.
func (q *QP) notSafeErr(what any, wrid uint64) error {
	return fmt.Errorf("failover: QP %#x: outstanding %v (wr_id %d): %w", q.qpn, what, wrid, ErrNotSafe)
}
