package failover

import (
	"fmt"
	"time"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Recovery (paper §4.3.3, docs/FAILOVER.md "Recovery"): while a QP's send side is in
// Fallback, one goroutine per QP reconnects the reset default QP with the attributes queried
// at RTR and RTS (both sides reset theirs once in every fallback round, so both count the
// same incarnation and derive the same PSNs from it, incarnationPSN) and probes it with a signaled zero-length WRITE, every ProbeInterval, doubling after
// a failure up to ProbeMaxInterval. On a successful probe the send side waits for the
// application's next signaled WR (WaitSignaled), which becomes the fence WR on the backup QP;
// the recovery notification and every later WR are written on the default QP with the
// doorbell withheld (package fence) until the fence WR completes, the notification alone is
// then released, and the rest once it completed (WaitDrained → Default). The receiver, on the
// notification, accounts what the backup delivered and reposts its outstanding receives on
// the default QP. If the application posts no signaled WR within FenceAfter (or
// FenceAfterWRs WRs), SHIFT posts its own signaled zero-length WRITE as the fence.

const (
	probeFailed = iota
	probeOK
	probeDone  // nothing more for this goroutine to do
	probeDrain // a fence is pending: poll its completions soon
	probeIdle  // the receive side waits for the peer's notification
	probeCut   // a round reset the default QP under the probe: it said nothing of the path
)

// probeWaitGuard bounds the wait for a probe's completion; the RC retry timer normally ends
// it much sooner (a lost probe completes in error).
const probeWaitGuard = 30 * time.Second

// startProbeLocked starts q's probe goroutine unless one runs or the context closes (a
// stepped context's probes are clock timers instead: probe_step.go).
func (q *QP) startProbeLocked() {
	if q.mach.probeState() == ProbeRunning || q.destroyed {
		return
	}
	c := q.c
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	if c.closing {
		return
	}
	_ = q.mach.event(wordProbe, EvProbeStart)
	if c.opts.Stepped {
		q.probeAfter(c.opts.ProbeInterval, c.opts.ProbeInterval)
		return
	}
	c.probeWG.Add(1)
	go q.probeLoop()
}

// stopProbes ends every probe goroutine of the context (Close).
func (c *Context) stopProbes() {
	c.probeMu.Lock()
	if !c.closing {
		c.closing = true
		close(c.quit)
	}
	c.probeMu.Unlock()
	c.probeWG.Wait()
}

func (q *QP) probeLoop() {
	defer q.c.probeWG.Done()
	o := q.c.opts
	iv := o.ProbeInterval
	t := time.NewTimer(iv)
	defer t.Stop()
	due := q.c.now().Add(iv)
	for {
		select {
		case <-q.c.quit:
			q.mu.Lock()
			_ = q.mach.event(wordProbe, EvProbeStop)
			q.mu.Unlock()
			return
		case <-q.up.nudge: // an up event (probe_up.go)
			now := q.c.now()
			d := q.nudgedNext(now, due.Sub(now), &iv)
			t.Reset(d) // no value of the timer's earlier setting is received after Reset
			due = now.Add(d)
			continue
		case <-t.C:
		}
		next, done := probeNext(&o, q.probeStep(), &iv)
		if done {
			return
		}
		t.Reset(next)
		due = q.c.now().Add(next)
	}
}

// probeNext is when the probe runs again after a step's result (iv, the wait between
// failed probes, doubles up to ProbeMaxInterval and starts over after a success), or done.
// After a success (WaitSignaled) it looks again after FenceAfter, but at least every
// ProbeInterval: a reset round the peer starts meanwhile (its own probe failed) puts the QP
// back in Fallback, and its probing must go on (startProbeLocked finds this goroutine
// running). Waiting the whole FenceAfter left the QP on the backup for it: an hour in
// TestProbeAfterRoundInWaitSignaled.
func probeNext(o *Options, res int, iv *time.Duration) (next time.Duration, done bool) {
	switch res {
	case probeOK:
		*iv = o.ProbeInterval
		return min(o.FenceAfter, o.ProbeInterval), false
	case probeFailed:
		*iv = min(2**iv, o.ProbeMaxInterval)
		return *iv, false
	case probeCut:
		// Cut short by a round (the peer's, or an up event's: probe_up.go): no doubling,
		// and no sooner than the wait it had, so that a probe the peer's reset round cut
		// does not go out before the peer, which resets only on our reply, did.
		return *iv, false
	case probeDrain:
		return 200 * time.Microsecond, false
	case probeIdle:
		return o.ProbeInterval, false
	}
	return 0, true
}

// probeStep does what the states ask of the probe goroutine: probe in Fallback, post SHIFT's
// fence once FenceAfter passed in WaitSignaled, poll the CQs for the fence's and the peer's
// notifications (the application may not poll), end once both sides are Default (probeDone,
// with the probe word stopped under the same lock a new fallback takes to restart probing).
//
// The goroutine keeps the timers and the wait for a probe's completion; what reads or changes
// the QP's state (probeBegin, probeEnd: a reset round when the default path failed) runs on
// the engine, in order with the other transitions (engine.wait).
func (q *QP) probeStep() int {
	var res int
	var gen uint64
	var posted bool
	if !q.c.eng.wait(func() { res, gen, posted = q.probeBegin() }) {
		return q.probeQuit()
	}
	if !posted {
		return res
	}
	r, ok := q.probeWait(gen)
	if !ok || !q.c.eng.wait(func() { res = q.probeEnd(r, gen) }) {
		return q.probeQuit()
	}
	return res
}

// probeQuit ends the probe goroutine of a closing context.
func (q *QP) probeQuit() int {
	q.mu.Lock()
	_ = q.mach.event(wordProbe, EvProbeStop)
	q.mu.Unlock()
	return probeDone
}

// probeBegin is probeStep's first part (engine): what the state asks, and in Fallback the
// probe posted (posted true, with the incarnation it probes).
func (q *QP) probeBegin() (res int, gen uint64, posted bool) {
	q.mu.Lock()
	if q.destroyed {
		_ = q.mach.event(wordProbe, EvProbeStop)
		q.mu.Unlock()
		return probeDone, 0, false
	}
	switch q.mach.sendState() {
	case SendFallback:
		if q.mach.pinState() != PinNone || q.mach.roundState() != RoundIdle || q.recvOnly() || q.toldRecvOnly {
			// Pinned to the backup, or a reset round waits for the peer's reply (until it
			// comes the peer's responder may still hold PSNs a new probe would reuse), or the
			// application never moved the QP to RTS (perftest's bandwidth servers stay in
			// RTR): it has no sends to bring back, and no first send PSN the peer's responder
			// expects, so a probe could only fail and start a reset round that takes the
			// peer's sends off the default path it just recovered (TestReceiveOnlyPeer); or
			// our last notification said so, and the peer's reset posted no control RECV
			// for a recovery notification of ours (recvonly.go).
			q.mu.Unlock()
			q.pollAsideBoth()
			return probeIdle, 0, false
		}
	case SendWaitSignaled:
		if q.c.now().Sub(time.Unix(0, q.tProbeOK)) < q.c.opts.FenceAfter {
			q.mu.Unlock()
			return probeOK, 0, false
		}
		if err := q.shiftFenceLocked(); err != nil {
			// The backup refused the fence WR: its failure takes the QP down elsewhere.
			q.failLocked(verbs.WCGeneralErr, err)
		}
		if q.mach.sendState() == SendFallback {
			q.mu.Unlock()
			return probeFailed, 0, false
		}
		q.mu.Unlock()
		return probeDrain, 0, false
	case SendWaitDrained:
		q.mu.Unlock()
		q.pollAsideBoth()
		return probeDrain, 0, false
	case SendDefault:
		if q.mach.recvState() == RecvFallback {
			q.mu.Unlock()
			q.pollAsideBoth()
			return probeIdle, 0, false
		}
		_ = q.mach.event(wordProbe, EvProbeStop)
		q.mu.Unlock()
		return probeDone, 0, false
	default:
		_ = q.mach.event(wordProbe, EvProbeStop)
		q.mu.Unlock()
		return probeDone, 0, false
	}
	gen = q.defGen.Load()
	if err := q.connectDefaultLocked(); err != nil {
		q.c.probeFails.Add(1)
		q.fallbackLocked(ctlMsg{}, false) // a reset round: the peer resets its default QP too
		q.mu.Unlock()
		return probeFailed, 0, false
	}
	q.probeRes.Store(0)
	q.fifoMu.Lock()
	q.dSendKinds = append(q.dSendKinds, kindProbe)
	q.fifoMu.Unlock()
	q.scq.mu.Lock()
	err := q.def.PostSendInternal([]verbs.SendWR{{WRID: ctrlWRID, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled}})
	q.scq.mu.Unlock()
	if err != nil {
		q.fifoMu.Lock()
		q.dSendKinds = q.dSendKinds[:len(q.dSendKinds)-1]
		q.fifoMu.Unlock()
		q.c.probeFails.Add(1)
		q.fallbackLocked(ctlMsg{}, false)
		q.mu.Unlock()
		return probeFailed, 0, false
	}
	q.c.probes.Add(1)
	q.stats.probes.Add(1)
	q.up.lastStart.Store(q.c.now().UnixNano())
	q.up.posted.Store(gen + 1)
	q.mu.Unlock()
	return probeOK, gen, true
}

// probeWait waits, without a lock, for the result of the probe of incarnation gen (1 success,
// 2 failure, 0 none within probeWaitGuard or a reset meanwhile); false once the context
// closes. The classifier records the probe's completion; the default CQ is polled here too,
// as the application may not be polling.
func (q *QP) probeWait(gen uint64) (int32, bool) {
	deadline := q.c.now().Add(probeWaitGuard)
	res := int32(0)
	for res == 0 && q.defGen.Load() == gen && q.c.now().Before(deadline) {
		select {
		case <-q.c.quit:
			return 0, false
		case <-time.After(500 * time.Microsecond):
		}
		q.scq.pollAside()
		res = q.probeRes.Load()
	}
	return res, true
}

// probeEnd is probeStep's last part (engine): the probe's result res for incarnation gen.
func (q *QP) probeEnd(res int32, gen uint64) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.up.posted.Store(0)
	if q.mach.sendState() != SendFallback || q.destroyed {
		_ = q.mach.event(wordProbe, EvProbeStop)
		return probeDone
	}
	if res == 1 && q.defGen.Load() == gen && q.mach.roundState() == RoundIdle && q.def.State() == verbs.QPStateRTS {
		if _, err := q.mach.sendEvent(EvProbeOK); err != nil {
			_ = q.mach.event(wordProbe, EvProbeStop)
			return probeDone
		}
		q.tProbeOK = q.c.now().UnixNano()
		q.wsCount = 0
		if q.backupIdleLocked() {
			// Nothing is in flight on the backup: no WR posted later on the default path
			// can overtake one, so the fence need not wait FenceAfter for the application's
			// next signaled WR (an idle sender, or a receive-only side, never posts one).
			if err := q.shiftFenceLocked(); err != nil {
				q.failLocked(verbs.WCGeneralErr, err)
			}
			if q.mach.sendState() == SendFallback {
				return probeFailed
			}
			return probeDrain
		}
		return probeOK
	}
	q.c.probeFails.Add(1)
	if q.defGen.Load() != gen {
		return probeCut
	}
	if q.mach.roundState() == RoundIdle {
		// The default QP is (or is about to be) in ERR: reconnecting it means a reset, and
		// only a round resets it (fallbackLocked): the peer's responder is reset with it.
		q.fallbackLocked(ctlMsg{}, false)
	}
	return probeFailed
}

func (q *QP) pollAsideBoth() {
	q.scq.pollAside()
	if q.rcq != q.scq {
		q.rcq.pollAside()
	}
}

// pollAside polls the default CQ on behalf of SHIFT (probe completions), keeping the
// application's completions in the buffer and raising its event if some arrived.
func (cq *CQ) pollAside() {
	cq.mu.Lock()
	before := len(cq.buf) - cq.head
	_ = cq.pollDefaultLocked()
	more := len(cq.buf)-cq.head > before
	work := cq.workLocked()
	cq.mu.Unlock()
	if work {
		cq.c.eng.kick(cq)
	}
	if more {
		cq.raise()
	}
}

// connectDefaultLocked brings the default QP to RTS towards the peer's default QP with the
// attributes queried when the application connected it and this incarnation's PSNs. It
// never resets the QP:
// a QP in any other state than INIT, RTR or RTS needs a reset round (fallbackLocked).
func (q *QP) connectDefaultLocked() error {
	switch q.def.State() {
	case verbs.QPStateRTS:
		return nil
	case verbs.QPStateInit:
		if err := q.toRTRLocked(); err != nil {
			return err
		}
	case verbs.QPStateRTR:
	default:
		return fmt.Errorf("failover: QP %#x: reconnect default QP in state %v: %w", q.qpn, q.def.State(), errNeedsReset)
	}
	if err := verbs.ToRTS(q.def, q.attr, incarnationPSN(q.rtsAttr.SQPSN, q.defGen.Load())); err != nil {
		return fmt.Errorf("failover: QP %#x: reconnect default QP: %w", q.qpn, err)
	}
	return nil
}

// psnStride separates the PSN ranges of successive incarnations of a default QP pair. Both
// sides count their resets (defGen) and every reset is part of a round that resets both
// (fallbackLocked), so the two counts agree whenever a requester and the peer's responder
// are connected, and each incarnation starts both directions at the connection's PSNs
// plus gen×psnStride. A packet of an earlier incarnation still in flight (sent before its QP
// was stopped, delivered after the peer's reset) then lands far from the expected PSN: the
// responder NAKs or re-ACKs it without executing it, instead of taking a stale recovery
// notification or message for the first packet of the new incarnation. The stride is odd
// and near 2^24/φ so that consecutive incarnations stay far apart modulo 2^24.
const psnStride = 0x9e3779

// incarnationPSN is the first PSN of incarnation gen for a direction that started at psn.
func incarnationPSN(psn uint32, gen uint64) uint32 {
	return (psn + uint32(gen)*psnStride) & 0xffffff
}

// toRTRLocked moves the default QP from INIT to RTR, expecting the peer's first PSN of this
// incarnation.
func (q *QP) toRTRLocked() error {
	remote := q.remote
	remote.PSN = incarnationPSN(q.rtrAttr.RQPSN, q.defGen.Load())
	if err := verbs.ToRTR(q.def, q.attr, remote); err != nil {
		return fmt.Errorf("failover: QP %#x: reconnect default QP: %w", q.qpn, err)
	}
	return nil
}

// signaledAt returns the index of the first signaled WR of wrs, or -1.
func (q *QP) signaledAt(wrs []verbs.SendWR) int {
	for i := range wrs {
		if q.sigAll || wrs[i].Flags&verbs.SendSignaled != 0 {
			return i
		}
	}
	return -1
}

// postWaitSignaledLocked posts wrs in WaitSignaled: on the backup QP up to the first signaled
// WR, which becomes the fence WR; the rest behind the fence on the default QP.
func (q *QP) postWaitSignaledLocked(wrs []verbs.SendWR) error {
	i := q.signaledAt(wrs)
	if i < 0 {
		if err := q.postBackupLocked(wrs); err != nil {
			return err
		}
		q.wsCount += len(wrs)
		if q.wsCount >= q.c.opts.FenceAfterWRs {
			return q.shiftFenceLocked()
		}
		return nil
	}
	if i > 0 {
		if err := q.postBackupLocked(wrs[:i]); err != nil {
			return err
		}
	}
	if err := q.beginFenceLocked(wrs[i], false); err != nil {
		return err
	}
	if i+1 < len(wrs) {
		return q.postDefaultLocked(wrs[i+1:], true)
	}
	return nil
}

// shiftFenceLocked posts SHIFT's own fence WR (a signaled zero-length WRITE on the backup).
func (q *QP) shiftFenceLocked() error {
	if q.mach.sendState() != SendWaitSignaled {
		return nil
	}
	q.c.shiftFences.Add(1)
	return q.beginFenceLocked(verbs.SendWR{WRID: ctrlWRID, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled}, true)
}

// beginFenceLocked posts w on the backup QP as the fence WR, writes the recovery
// notification on the default QP behind a withheld doorbell, and enters WaitDrained.
func (q *QP) beginFenceLocked(w verbs.SendWR, shift bool) error {
	bs := q.cs()
	b := bs.qp.Load()
	var sges []verbs.SGE
	bw := w
	kind := uint8(kindCtrl)
	if !shift {
		var err error
		if bw, err = q.rewriteLocked(w, &sges); err != nil {
			return fmt.Errorf("failover: post_send on QP %#x: %w", q.qpn, err)
		}
		kind = kindApp
	}
	bw.Flags |= verbs.SendSignaled
	if q.fn == nil {
		f, err := fence.New(b, q.def)
		if err != nil {
			return fmt.Errorf("failover: QP %#x: %w", q.qpn, err)
		}
		q.scq.mu.Lock()
		q.fn = f
		q.scq.mu.Unlock()
	} else if err := q.fn.Reset(); err != nil {
		return fmt.Errorf("failover: QP %#x: %w", q.qpn, err)
	}
	q.fifoMu.Lock()
	m := q.beginPush(bs)
	bs.sendKinds = append(bs.sendKinds, kind)
	if !shift {
		q.logBackupFifo([]verbs.SendWR{w}) // before the post (bklog.go)
	}
	q.endPush(bs, &m)
	q.dSendKinds = append(q.dSendKinds, kindNotify)
	q.fifoMu.Unlock()
	// The immediate: how many two-sided messages we sent up to the fence WR, all on the
	// backup (recvcount.go); the fence WR itself was counted as it was logged.
	sent := q.twoSided
	notify := verbs.SendWR{WRID: ctrlWRID, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, Imm: sent & countMask}
	// The fence WR's completion must not be polled before Begin: both under the send CQ's
	// mutex, which every poller of the backup CQ holds.
	q.scq.mu.Lock()
	pos := b.SendProducer()
	err := b.PostSend([]verbs.SendWR{bw})
	posted := err == nil
	if posted {
		err = q.fn.Begin(fence.WR{Pos: pos, WRID: bw.WRID}, &notify)
	}
	q.scq.mu.Unlock()
	if err != nil {
		q.fifoMu.Lock()
		q.dSendKinds = q.dSendKinds[:len(q.dSendKinds)-1]
		if !posted {
			q.rollbackFifo(bs, m)
		}
		q.fifoMu.Unlock()
		return fmt.Errorf("failover: QP %#x: fence: %w", q.qpn, err)
	}
	if _, err := q.mach.sendEvent(EvFenceWR); err != nil {
		return err
	}
	q.tFence = q.c.now().UnixNano()
	// From here the application's WRs go to the default QP (withheld behind the fence): its
	// ring is where a later fallback reads them back from, and its own two-sided count
	// goes on from ours.
	q.defFrom = q.def.SendProducer()
	q.twoOff = q.twoSided - q.def.TwoSidedPosted()
	return nil
}

// fenceWCLocked hands a send completion of the default or backup QP (with its own QP
// number) to a pending fence; the caller holds the send CQ's mutex.
func (cq *CQ) fenceWCLocked(q *QP, w *verbs.WC) {
	f := q.fn
	if f == nil {
		return
	}
	if s := f.State(); s != fence.Withholding && s != fence.Notifying {
		return
	}
	_, _ = f.HandleWC(w)
	if f.State() == fence.Done {
		cq.drained = append(cq.drained, q)
	}
}

// finishRecovery ends WaitDrained once the fence released everything (runPending).
func (q *QP) finishRecovery() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mach.sendState() != SendWaitDrained || q.fn == nil || q.fn.State() != fence.Done {
		return
	}
	if _, err := q.mach.sendEvent(EvDrained); err != nil {
		return
	}
	// Every WR on the backup completed before the fence WR: none is left to move should
	// the backup fail later.
	q.fifoMu.Lock()
	q.bkLog = nil
	q.fifoMu.Unlock()
	now := q.c.now().UnixNano()
	sw, st := now-q.tProbeOK, now-q.tFence
	q.lastSwitch.Store(sw)
	q.lastStall.Store(st)
	q.c.switchBackNS.Add(sw)
	q.c.stallNS.Add(st)
	q.c.recoveries.Add(1)
	q.stats.recoveries.Add(1)
	q.armNeverSentWaitLocked(neverSentAsks) // a receive-only peer's message may be lost (recvonly.go)
	q.reopenLocked()                        // if the receive side is back too
}

// recoverRecv moves the receive side back to the default QP on the peer's recovery
// notification (runPending): every message the peer sent on the backup was received before
// the notification (the peer's fence), and sent counts them; once the backup CQ gave their
// completions (recvcount.go) the receive counter is exact, and the receives not consumed
// are reposted on the default QP, in order. Those left on the backup RQ are marked stale:
// the next fallback's peer consumes them with fillers.
//
// A notification found while a new fallback drains the default QP (gen is no longer the
// default QP's incarnation, or the QP left RTS) is ignored: the receives stay on the backup
// and the peer reposts from our receive counter.
func (q *QP) recoverRecv(gen uint64, sent uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recoverRecvLocked(gen, sent)
}

// recoverRecvLocked is recoverRecv with q.mu held.
func (q *QP) recoverRecvLocked(gen uint64, sent uint32) {
	if !q.recoverableLocked(gen) || !q.awaitReceivedLocked(gen, sent) {
		return
	}
	q.fifoMu.Lock()
	bs := q.cs()
	for i, k := range bs.recvKinds {
		if k == kindApp {
			bs.recvKinds[i] = kindStale
			bs.staleMarked++
		}
	}
	q.fifoMu.Unlock()
	var recvs []verbs.RecvWR
	for i := q.recvDone; i < q.rPosted.Load(); i++ {
		recvs = append(recvs, q.loggedRecv(i))
	}
	if len(recvs) > 0 {
		if err := q.postDefaultRecvsLocked(recvs, true); err != nil {
			// The default QP broke again: the receives stay on the backup (those held
			// by a round's wait go there when it ends: flushHeld).
			return
		}
	}
	q.rHeld = 0 // posted with the rest of the log's tail
	if _, err := q.mach.recvEvent(EvDrained); err != nil {
		return
	}
	q.c.recvRecoveries.Add(1)
	if q.mach.pinState().peer() {
		// The peer came back from its switch: our sends may follow, once a probe says the
		// default path works.
		_ = q.mach.pinEvent(EvPeerBack)
		if q.mach.sendState() == SendFallback {
			q.startProbeLocked()
		}
	}
	q.neverSentBackLocked() // a receive-only QP's send side returns with it (recvonly.go)
	q.reopenLocked()        // if the send side is back too
	q.rcq.raise()
}

// SwitchBackLatency is the last recovery's time from probe success to Default (0: none yet).
func (q *QP) SwitchBackLatency() time.Duration { return time.Duration(q.lastSwitch.Load()) }

// RecoveryStall is the last recovery's application-visible stall: from the fence WR posted
// (later WRs withheld) to Default (0: none yet).
func (q *QP) RecoveryStall() time.Duration { return time.Duration(q.lastStall.Load()) }

// backupIdleLocked reports whether the backup QP has no send WQE outstanding and no WR waits
// to be posted: every WR sent on the backup has completed, so it was delivered.
func (q *QP) backupIdleLocked() bool {
	b := q.Backup()
	if b == nil || len(q.pending) > 0 {
		return false
	}
	q.scq.mu.Lock()
	q.outSends = b.OutstandingSends(q.outSends[:0])
	q.scq.mu.Unlock()
	return len(q.outSends) == 0
}
