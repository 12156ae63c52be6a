package failover

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// drainWRID is the wr_id of the drain marker (drainLocked); its flush completion is dropped
// by the classifier.
const drainWRID = 0x5348_4946_545f_4452 // "SHIFT_DR"

// ctrlWRID is the wr_id of SHIFT's own control WRs. Healthy completions are recognised by
// position (each backup QP keeps the order of its posted WQEs); the wr_id is used only for
// error completions, whose WQE position the WC does not carry.
const ctrlWRID = 0x5348_4946_545f_4354 // "SHIFT_CT"

// CQ is a completion queue: the default CQ and its shadow on the backup device, plus the WC
// buffer that keeps, in order, the completions SHIFT took out of the CQs for the application.
type CQ struct {
	c      *Context
	def    *provider.CQ
	bk     []atomic.Pointer[provider.CQ] // one per backup device
	size   int
	handle uint64 // user handle of its completion events

	// gate is the fast path's gate (gate.go): gateOwn, or a word outside Go's heap that a C
	// data path reads too (ShareGate); the CQ's own word again once destroyed.
	gate    *atomic.Uint32
	gateOwn atomic.Uint32
	// destroyed: Destroy succeeded; SHIFT's late work no longer polls the CQ (mu).
	destroyed bool

	// last caches the QP of the last completion (rdma-core's cur_rsc); poller-owned.
	last *QP
	qps  atomic.Pointer[map[uint32]*QP]   // default QPN → QP
	bqps []atomic.Pointer[map[uint32]*QP] // per backup device: backup or control QPN → QP

	mu       sync.Mutex
	buf      []verbs.WC // WC buffer, oldest first from head
	head     int
	scratch  []verbs.WC
	toFail   []*QP      // default QPs that reported an error: fall back
	toFailBk []bkFail   // backup QPs that reported an error: fail
	recov    []recovEvt // peers' recovery notifications received on default QPs
	drained  []*QP      // fences done: their QPs go back to Default
	// neverSent: receive-only QPs whose last SHIFT send on the backup completed, for
	// neverSentBackLocked to look at again (recvonly.go).
	neverSent []*QP
	// slow counts the QPs using this CQ that are off the fast path (q.slow): while it is not
	// zero, SHIFT's completions or the backup's may reach this CQ and the gate stays closed.
	slow int
	ev   eventState
	// reopens counts the gate's reopenings (tests).
	reopens atomic.Uint64
	// running counts runPending calls under way: the fallbacks they run count their QPs
	// slow only once they hold the QP's mutex, so the gate stays closed until they did.
	running int
	// kicked: the CQ is queued for the engine (engine.mu).
	kicked  bool
	tableMu sync.Mutex // serialises map updates
}

// recovEvt is a peer's recovery notification, the default QP incarnation it arrived on, and
// the peer's two-sided count at its fence WR (the notification's immediate).
type recovEvt struct {
	q    *QP
	gen  uint64
	sent uint32
}

type bkFail struct {
	q   *QP
	wc  verbs.WC // the backup's error completion (on the backup data QP or its control endpoint)
	set int
}

// CreateCQ is ibv_create_cq for at least a.CQE entries. The shadow CQ on the backup device is
// larger (SHIFT's control completions) and bound to the backup's completion channel.
func (c *Context) CreateCQ(a verbs.CQInitAttr) (verbs.CQ, error) {
	ch, ok := a.Channel.(*CompChannel)
	if a.Channel != nil && (!ok || ch != nil && ch.c != c) {
		return nil, fmt.Errorf("failover: create_cq: %w: completion channel of another context", verbs.ErrInvalidArgument)
	}
	var pch verbs.CompChannel
	if ch != nil {
		pch = ch.def
	}
	d, err := as[*provider.CQ](c.def.CreateCQ(verbs.CQInitAttr{CQE: a.CQE, Channel: pch, CompVector: a.CompVector, Handle: a.Handle}))
	if err != nil {
		return nil, fmt.Errorf("failover: create_cq: %w", err)
	}
	cq := &CQ{c: c, def: d, size: a.CQE, handle: a.Handle, scratch: make([]verbs.WC, 64),
		bk: make([]atomic.Pointer[provider.CQ], len(c.bks)), bqps: make([]atomic.Pointer[map[uint32]*QP], len(c.bks))}
	cq.gate = &cq.gateOwn
	if cq.handle == 0 {
		cq.handle = c.cqIDs.Add(1)
	}
	cq.ev.ch = ch
	empty := map[uint32]*QP{}
	cq.qps.Store(&empty)
	for i := range cq.bqps {
		empty2 := map[uint32]*QP{}
		cq.bqps[i].Store(&empty2)
	}
	if ch != nil {
		ch.bind(cq)
	}
	cqe := a.CQE
	c.record("create_cq", func(bd *backupDev) error {
		b, err := as[*provider.CQ](bd.ctx.CreateCQ(verbs.CQInitAttr{CQE: 2*cqe + 64, Channel: bd.ch}))
		if err != nil {
			return err
		}
		bd.cqMu.Lock()
		bd.cqs[b] = cq
		bd.cqMu.Unlock()
		cq.bk[bd.idx].Store(b)
		return b.Arm(false)
	})
	return cq, nil
}

// ShareGate moves the CQ's fast-path gate to w, a word outside Go's heap (C memory), so that
// a C data path can answer an empty poll without entering Go: while *w is zero (open) the
// WC buffer is empty and the default CQ alone holds the application's completions, so a
// default CQ whose next entry (at the consumer index in its doorbell record) is still the
// device's means Poll would return nothing. Call it right after CreateCQ, before a QP uses
// the CQ; w must stay valid until Destroy returns, and SHIFT never touches it afterwards.
func (cq *CQ) ShareGate(w *atomic.Uint32) {
	w.Store(cq.gate.Load())
	cq.gate = w
}

// Size is the number of completions the CQ holds for the application.
func (cq *CQ) Size() int { return cq.def.Size() }

// Default is the default provider CQ.
func (cq *CQ) Default() *provider.CQ { return cq.def }

// Destroy is ibv_destroy_cq on both devices.
func (cq *CQ) Destroy() error {
	cq.mu.Lock()
	if err := cq.def.Destroy(); err != nil {
		cq.mu.Unlock()
		return fmt.Errorf("failover: destroy_cq: %w", err)
	}
	// SHIFT's work still under way for this CQ (a backup CQ's late completions, a queued
	// kick, the flushes of a failed set) leaves it alone from here on, and what still
	// touches its gate touches the CQ's own word: a C data path frees the word it shared
	// (ShareGate) as soon as destroy_cq returns.
	cq.destroyed = true
	cq.gateOwn.Store(gateClosed)
	cq.gate = &cq.gateOwn
	cq.mu.Unlock()
	if cq.ev.ch != nil {
		cq.ev.ch.unbind(cq)
	}
	cq.c.record("destroy_cq", func(b *backupDev) error {
		cq.mu.Lock() // no poll under the mutex (onBackupEvent) is inside the ring it frees
		bcq := cq.bk[b.idx].Swap(nil)
		cq.mu.Unlock()
		if bcq == nil {
			return nil
		}
		b.cqMu.Lock()
		delete(b.cqs, bcq)
		b.cqMu.Unlock()
		return bcq.Destroy()
	})
	return nil
}

func (cq *CQ) addQP(m *atomic.Pointer[map[uint32]*QP], qpn uint32, q *QP) {
	cq.tableMu.Lock()
	defer cq.tableMu.Unlock()
	old := *m.Load()
	n := make(map[uint32]*QP, len(old)+1)
	for k, v := range old {
		n[k] = v
	}
	if q == nil {
		delete(n, qpn)
	} else {
		n[qpn] = q
	}
	m.Store(&n)
}

func (cq *CQ) lookup(qpn uint32) *QP {
	if l := cq.last; l != nil && l.qpn == qpn {
		return l
	}
	q := (*cq.qps.Load())[qpn]
	cq.last = q
	return q
}

// Poll is ibv_poll_cq: the WC buffer first, then the default CQ, then (after a fallback) the
// backup CQ, with the application's wr_ids and QP numbers; SHIFT's own completions are never
// returned. While every QP of the CQ is in Default it is the provider's poll behind one
// atomic gate plus the receive counters: no lock, no allocation; an empty CQ costs two
// loads (the gate and the next CQE's owner bit), no locked instruction.
func (cq *CQ) Poll(wcs []verbs.WC) (int, error) {
	// Empty and open: nothing for the application anywhere (an open gate means an empty WC
	// buffer and no backup completion for it). A poll that closes the gate right after this
	// load is ordered after this call, which returns what the CQ held before it.
	if cq.gate.Load() == gateOpen && cq.def.Empty() {
		return 0, nil
	}
	if !cq.gate.CompareAndSwap(gateOpen, gateBusy) {
		return cq.pollSlow(wcs)
	}
	n, err := cq.def.Poll(wcs)
	for i := 0; i < n; i++ {
		w := &wcs[i]
		q := cq.lookup(w.QPNum)
		if w.Status != verbs.WCSuccess || q == nil {
			// A failure: from here on the CQ is polled under its mutex. The rest of this
			// batch goes through the classifier, in order, and is returned from the buffer.
			cq.gate.Store(gateClosed)
			cq.mu.Lock()
			if w.Status != verbs.WCSuccess {
				// Kick before classifying: the engine's goroutine, parked, takes 8–22 µs p50
				// to run on the 2-core VM, and the classification of the error and the
				// flushes behind it, up to a ring's worth, takes several µs; the engine's
				// work waits on cq.mu until it is done (BenchmarkFallbackLatency, a
				// temporary trace of 2026-11-30: error polled → the round's start 19–21 µs
				// before, 13–15 µs after, with the kept completions sized once).
				cq.c.eng.kick(cq)
			}
			cq.classifyLocked(wcs[i:n])
			cq.mu.Unlock()
			m, err2 := cq.pollSlow(wcs[i:]) // kicks for what it queues
			return i + m, errors.Join(err, err2)
		}
		if w.Opcode&verbs.WCRecv != 0 {
			q.recvDone++
		}
	}
	cq.gate.Store(gateOpen)
	return n, err
}

// pollSlow is Poll once the gate is closed.
func (cq *CQ) pollSlow(wcs []verbs.WC) (int, error) {
	cq.mu.Lock()
	err := cq.pollDefaultLocked()
	if err2 := cq.pollBackupLocked(); err2 != nil {
		err = errors.Join(err, err2)
	}
	work := cq.workLocked()
	n := cq.takeLocked(wcs)
	if !work && err == nil {
		cq.reopenCQLocked()
	}
	cq.mu.Unlock()
	if work {
		cq.c.eng.kick(cq) // the transitions run off the application's thread
	}
	return n, err
}

// reopenCQLocked opens the CQ's gate again once every QP using the CQ is back on the fast
// path (slow is zero: no QP has SHIFT's WQEs, a fence or application WQEs on the backup left)
// and the WC buffer is empty: from here on the default CQ alone holds the application's
// completions, in order, and the fast path polls it. The caller holds cq.mu, the same lock
// under which a fallback counts its QP slow before it closes the gate, so a reopen can never
// undo that close. A completion the backup CQ still reports later (its QP failed: flushes)
// closes the gate again (onBackupEvent).
func (cq *CQ) reopenCQLocked() {
	if cq.slow != 0 || cq.running != 0 || cq.head != len(cq.buf) || cq.gate.Load() != gateClosed {
		return
	}
	if cq.workLocked() {
		return
	}
	if reopenGate(cq.gate) {
		cq.reopens.Add(1)
	}
}

// workLocked reports whether the pollers queued transitions for runPending.
func (cq *CQ) workLocked() bool {
	return len(cq.toFail)+len(cq.toFailBk)+len(cq.recov)+len(cq.drained)+len(cq.neverSent) > 0
}

func (cq *CQ) takeLocked(wcs []verbs.WC) int {
	n := copy(wcs, cq.buf[cq.head:])
	cq.head += n
	if cq.head == len(cq.buf) {
		cq.buf, cq.head = cq.buf[:0], 0
	}
	return n
}

func (cq *CQ) pushLocked(w verbs.WC) { cq.buf = append(cq.buf, w) }

// pollDefault is pollDefaultLocked taking cq.mu.
func (cq *CQ) pollDefault() {
	cq.mu.Lock()
	_ = cq.pollDefaultLocked()
	cq.mu.Unlock()
}

// pollDefaultLocked moves the default CQ's completions through the classifier. It polls only
// while the gate is closed: with the gate open (or busy) the fast path owns the default CQ,
// and a reopen (which also holds cq.mu) cannot happen while this runs.
func (cq *CQ) pollDefaultLocked() error {
	if cq.destroyed || cq.gate.Load() != gateClosed {
		return nil
	}
	for {
		n, err := cq.def.Poll(cq.scratch)
		cq.classifyLocked(cq.scratch[:n])
		if err != nil || n < len(cq.scratch) {
			return err
		}
	}
}

// classifyLocked accounts and buffers completions of default QPs.
func (cq *CQ) classifyLocked(ws []verbs.WC) {
	for i := range ws {
		w := ws[i]
		q := cq.lookup(w.QPNum)
		if q == nil {
			cq.pushLocked(w)
			continue
		}
		if w.WRID == drainWRID && w.Opcode&verbs.WCRecv == 0 {
			continue // the drain marker: it only retired the WQEs before it
		}
		switch q.defMode {
		case defLive:
			if w.Status == verbs.WCSuccess {
				if w.Opcode&verbs.WCRecv != 0 {
					q.recvDone++
				}
				cq.pushLocked(w)
				continue
			}
			if q.tErr.Load() == 0 { // the QP's first error: stamped before keeping it costs anything
				q.tErr.CompareAndSwap(0, cq.c.now().UnixNano())
			}
			q.fifoMu.Lock()
			q.keepErrLocked(ownedWC{cq: cq, wc: w})
			first := !q.failQueued
			q.failQueued = true
			q.fifoMu.Unlock()
			if first {
				cq.toFail = append(cq.toFail, q)
			}
		case defTracked:
			cq.classifyTrackedLocked(q, w)
		case defPassThrough:
			if w.WRID == ctrlWRID {
				// SHIFT's own WR on the default QP, posted while it was tracked (the control
				// RECV, a probe, the fence's notification): its flush is not the
				// application's (simulation seed 29616: the application stopped its QP
				// after a recovery, and the control RECV's flush reached it after the
				// destroy).
				continue
			}
			cq.pushLocked(w)
		case defDropped:
			// Completions of the reset default QP (its control RECV flushed): SHIFT's own.
		}
	}
}

// keepErrLocked keeps e, an error completion of the application's on q's default QP, for
// q's round (classify.go). The first is followed by the flushes of every WQE outstanding:
// the list is sized once, for up to errWCsFirst of them, instead of growing append by
// append while the engine waits for the classification to end (the same trace: 4–10 µs of
// the 64-WQE round's start). Called with q.fifoMu held.
func (q *QP) keepErrLocked(e ownedWC) {
	if q.errWCs == nil {
		q.errWCs = make([]ownedWC, 0, min(int(q.cap.MaxSendWR+q.cap.MaxRecvWR)+sendReserve+recvReserve, errWCsFirst))
	}
	q.errWCs = append(q.errWCs, e)
}

// errWCsFirst bounds keepErrLocked's first allocation (14 KiB): a deep QP's failure must not
// allocate its whole depth up front, a thousand QPs failing at once.
const errWCsFirst = 256

// classifyTrackedLocked handles a completion of a default QP that fell back once: its
// posted receives and signaled sends are SHIFT's or the application's by position.
func (cq *CQ) classifyTrackedLocked(q *QP, w verbs.WC) {
	recv := w.Opcode&verbs.WCRecv != 0
	if w.Status != verbs.WCSuccess {
		st, rs := q.mach.sendState(), q.mach.recvState()
		if st == SendDefault || st == SendWaitDrained || rs == RecvDefault {
			// The recovered path failed: fall back again (SHIFT's own WRs and the
			// flushes are dropped; the outstanding WRs are reposted from the logs).
			if !recv {
				cq.fenceWCLocked(q, &w)
			}
			q.fifoMu.Lock()
			c := statusClass(w.Status)
			switch {
			case w.WRID != ctrlWRID && w.WRID != drainWRID:
				// The application's WR: its error is kept whatever its class, as on a live
				// default QP. fallbackLocked decides whose it is; a refused fallback (an
				// atomic outstanding) hands it to the application as it is. A network
				// error was once dropped here, as if every such WR were reposted, and the
				// FETCH_AND_ADD that refused the fallback never completed (simulation
				// seed 136472: recovered, then the default link failed again).
				q.keepErrLocked(ownedWC{cq: cq, wc: w})
			case c != classFlush:
				q.shiftErrSeen = true // a failure of SHIFT's own WR: the flushes behind it are its
			}
			first := !q.failQueued
			q.failQueued = true
			q.fifoMu.Unlock()
			if first {
				q.tErr.Store(cq.c.now().UnixNano())
				cq.toFail = append(cq.toFail, q)
			}
			return
		}
		q.probeRes.CompareAndSwap(0, 2) // a probe (or its path) failed
		return
	}
	if recv {
		if q.popKind(&q.dRecvKinds) != kindApp {
			cq.recov = append(cq.recov, recovEvt{q, q.defGen.Load(), w.Imm & countMask}) // the peer's recovery notification
			return
		}
		q.recvDone++
		cq.pushLocked(w)
		return
	}
	switch q.popKind(&q.dSendKinds) {
	case kindProbe:
		q.probeRes.CompareAndSwap(0, 1)
	case kindNotify:
		cq.fenceWCLocked(q, &w)
	default:
		cq.fenceWCLocked(q, &w)
		cq.pushLocked(w)
	}
}

// pollBackupLocked takes the completions of every backup device's CQ (pollBackupDevLocked).
func (cq *CQ) pollBackupLocked() error {
	var errs []error
	for i := range cq.bk {
		if err := cq.pollBackupDevLocked(i); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pollBackupDevLocked takes the completions of backup device i's CQ: the application's are
// buffered with the default QPN, SHIFT's are consumed (notifications queued for
// runPending). An error completion of a QP's backup set in use is kept back until
// failBackup decides between the next backup and the application (bkSet.stash); those of a
// set the QP left are dropped, their WRs reposted elsewhere.
func (cq *CQ) pollBackupDevLocked(i int) error {
	b := cq.bk[i].Load()
	if b == nil || cq.destroyed {
		return nil
	}
	bq := *cq.bqps[i].Load()
	for {
		n, err := b.Poll(cq.scratch)
		for k := range cq.scratch[:n] {
			w := cq.scratch[k]
			q := bq[w.QPNum]
			if q == nil {
				continue
			}
			bs := q.sets[i]
			if w.Opcode&verbs.WCRecv == 0 {
				cq.fenceWCLocked(q, &w) // with the backup QP's number
			}
			bw := w // with the backup QP's number
			w.QPNum = q.qpn
			if w.Status != verbs.WCSuccess {
				q.fifoMu.Lock()
				switch {
				case bs.dead, bs.deadFlushed:
					// Dropped: the set was left, or SHIFT completed what waited on it when
					// its device was taken for dead (flushDeadSetLocked). A device the
					// watchdog took for hung can still write the flushes of the QP moved
					// to ERR: each WR completed twice (simulation seed 345712).
				case bs.gaveUp && w.Opcode&verbs.WCRecv != 0:
					// A receive flushed on the set the QP failed on: the application's (its
					// kind says so) is completed and counted, as a success would be, so that
					// flushDeadSetLocked does not complete it again (simulation seed 24210:
					// a stopped QP's RECV completed twice, after its destroy).
					q.fifoMu.Unlock()
					if q.popKind(&bs.recvKinds) == kindApp {
						q.recvDone++
						cq.pushLocked(w)
					}
					continue
				case bs.gaveUp:
					if w.WRID != ctrlWRID {
						q.retireBkLogTo(w.WRID) // reported: not for flushDeadSetLocked
						cq.pushLocked(w)
					}
				default:
					if !bs.failQueued {
						bs.failQueued = true
						cq.toFailBk = append(cq.toFailBk, bkFail{q, bw, i})
					}
					if w.WRID != ctrlWRID {
						bs.stash = append(bs.stash, ownedWC{cq: cq, wc: w})
					}
				}
				q.fifoMu.Unlock()
				q.laterDueLocked(cq) // stopwithheld.go
				continue
			}
			if w.Opcode&verbs.WCRecv != 0 {
				if q.popKind(&bs.recvKinds) != kindApp {
					continue // a filler (zero-length SEND) consumed a stale RECV
				}
				q.recvDone++
			} else {
				switch q.popKind(&bs.sendKinds) {
				case kindCtrl:
					if q.neverSentDue(bs) {
						cq.neverSent = append(cq.neverSent, q)
					}
					continue
				case kindHeld:
					w.Opcode = q.popHeldOp(bs)
				}
				q.retireBkLog()
			}
			q.tOK.CompareAndSwap(0, cq.c.now().UnixNano())
			cq.pushLocked(w)
			q.laterDueLocked(cq) // stopwithheld.go
		}
		if err != nil || n < len(cq.scratch) {
			return err
		}
	}
}

// runPending runs the fallbacks, failures and notifications the pollers found; it takes QP
// mutexes, so it runs with no CQ mutex held.
func (cq *CQ) runPending() {
	cq.mu.Lock()
	toFail, toFailBk := cq.toFail, cq.toFailBk
	recov, drained, neverSent := cq.recov, cq.drained, cq.neverSent
	cq.toFail, cq.toFailBk, cq.recov, cq.drained, cq.neverSent = nil, nil, nil, nil, nil
	cq.running++
	cq.mu.Unlock()
	defer func() {
		cq.mu.Lock()
		cq.running--
		cq.mu.Unlock()
	}()
	for _, q := range drained {
		q.finishRecovery()
	}
	for _, q := range neverSent {
		q.neverSentBack()
	}
	for _, r := range recov {
		r.q.recoverRecv(r.gen, r.sent)
	}
	for _, q := range toFail {
		q.fallback(ctlMsg{}, false)
	}
	for _, f := range toFailBk {
		f.q.failBackup(f)
	}
}

// onBackupEvent runs on backup device i's event goroutine.
func (cq *CQ) onBackupEvent(i int) {
	cq.mu.Lock()
	if cq.destroyed {
		cq.mu.Unlock()
		return
	}
	// Re-arm before polling so a completion after the poll raises a new event; under the
	// mutex because arming reads the consumer index the poller writes.
	if b := cq.bk[i].Load(); b != nil {
		_ = b.Arm(false)
	}
	before := len(cq.buf) - cq.head
	_ = cq.pollBackupDevLocked(i)
	more := len(cq.buf)-cq.head > before
	if more {
		// Completions for the application from the backup (a failed backup's flushes):
		// the fast path would never return them, so the CQ is polled under the mutex until
		// the buffer is empty again. Closing with cq.mu held is safe: a fast call inside
		// never waits for cq.mu before it leaves the gate.
		closeGate(cq.gate)
	}
	cq.mu.Unlock()
	cq.c.eng.kick(cq)
	if more {
		cq.raise()
	}
}
