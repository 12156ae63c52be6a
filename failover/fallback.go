package failover

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/provider/verbs"
)

// fallback moves q to the backup (State 1 → 2, paper §4.3.2). It runs on the engine, for
// what found the failure: an error completion or failed post (fromPeer false) or the peer's
// notification on the backup QP carrying the peer's receive counter and stale-RECV count
// (fromPeer true). Each side sends exactly one notification per fallback: the peer's that
// arrives while ours is out is the reply. After a recovery the same runs again; a side whose
// sends are already on the backup (Fallback, WaitSignaled) only moves its receives (if the
// peer's sends had come back) and replies.
func (q *QP) fallback(peer ctlMsg, fromPeer bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fallbackLocked(peer, fromPeer)
}

// onControl handles the peer's notification that arrived on the control QP of backup set
// set (runPending): on the set in use, a fallback round; on another live one (a later one,
// or one re-armed since it was left, rearm.go), the peer moved to that backup because the
// one in use failed (chainLocked); on a set left behind (dead), a stale message (its round
// was resolved on the next backup).
func (q *QP) onControl(peer ctlMsg, set int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if peer.neverSent { // not a round (recvonly.go)
		if peer.reply {
			q.neverSentAgainLocked() // the peer asks again: it did not get ours
			return
		}
		q.peerNeverSentLocked(peer)
		return
	}
	if !peer.refused {
		q.peerRecvOnly = peer.recvOnly
	}
	cur := int(q.cur.Load())
	switch {
	case set == cur:
		q.fallbackLocked(peer, true)
	case set != cur && !peer.reply && !peer.refused && q.failedSide():
		// A failed QP does not follow the peer to another set: chainLocked would drain its
		// set given up, dropping as the set's the flushes that are the application's (on a
		// hung device, where none come, the WRs left were never completed: internal/sim,
		// failover seed 95126 with two backups, the application's stop during a reset round
		// on a backup NIC that hung). The set keeps them (flushDeadSetLocked once its
		// device is found dead); the refusal goes where the peer now is.
		if q.sets[set].ready.Load() && !q.setDead(set) {
			_ = q.sendCtlOnLocked(set, ctlMsg{refused: true, reply: true})
		}
	case set != cur && !peer.reply && !peer.refused && q.sets[set].ready.Load() && !q.setDead(set):
		q.chainLocked(set, peer, true)
	case set != cur && peer.refused:
		// The peer's QP failed (or is gone) and said so again on another set, its first
		// refusal lost with a control endpoint (resendRefusals), or withdrew a notification
		// it sent there (withdrawLocked): it will not follow on any.
		q.fallbackLocked(peer, true)
	}
}

// failedSide reports whether q's send or receive side failed: SHIFT gave the QP up, and it
// refuses the peer's notifications (notifyRefusalLocked).
func (q *QP) failedSide() bool {
	return q.mach.sendState() == SendFailed || q.mach.recvState() == RecvFailed
}

// fallbackLocked is a fallback round onto the backup set in use (see roundLocked).
func (q *QP) fallbackLocked(peer ctlMsg, fromPeer bool) { q.roundLocked(peer, fromPeer, false) }

// roundLocked is fallback with q.mu held (the engine's, as every transition: engine.go); a
// probe step calls it when the default path failed under a probe or a fence while nothing of
// ours ran on it. Where it waits for a NIC, it releases q.mu (roundwait.go).
//
// Every fallback is a round in which both sides reset their default QP exactly once (docs/
// FAILOVER.md "Reset rounds"): the default QPs reconnect with the PSNs of the original
// connection, so a requester may only start again once the peer's responder was reset too,
// or a responder that has passed those PSNs takes the new packets for duplicates, ACKs them
// and drops them. A side moves its default QP to ERR before it notifies (its packets are
// dropped from then on) and resets it only once the peer's notification came: the replier
// after receiving ours, the initiator on the reply. A probe therefore only ever reaches a
// responder of its own incarnation or one in ERR or INIT, which drops it.
//
// With chain, the backup set in use has just replaced one that failed (chainLocked): what
// ran on the failed set (sends in Fallback or WaitSignaled, receives in Fallback) moves to
// the new set as what ran on the default QP does, and a round already under way starts
// again on the new set's control QP (its notification may have been lost with the old one).
func (q *QP) roundLocked(peer ctlMsg, fromPeer, chain bool) {
	if q.destroyed {
		return // its rings may be unmapped (a chained round's drain waited: roundwait.go)
	}
	if h := testHookRound.Load(); h != nil {
		(*h)()
	}
	// The time spent here, SHIFT's own share of the fallback (measure_test.go).
	t0 := q.c.now().UnixNano()
	defer func() { q.tBusy.Add(q.c.now().UnixNano() - t0) }()
	st, rs := q.mach.sendState(), q.mach.recvState()
	if q.failedSide() {
		if fromPeer && !peer.reply && !peer.refused {
			// A failed QP (the application's error, a refused or failed fallback) cannot
			// follow: say so, or the peer waits for its handshake timeout.
			q.notifyRefusalLocked()
		}
		return
	}
	rd := q.mach.roundState()
	if fromPeer && peer.reply && rd == RoundIdle {
		// A duplicate reply, resent on a later backup, or one to our notification whose
		// round the peer's crossing notification ended: the round is over.
		q.roundOverForProbe(true)
		return
	}
	if fromPeer && peer.refused {
		// The peer will not follow: what this side holds for it cannot be delivered.
		_ = q.mach.roundEvent(EvRoundOver)
		q.failLocked(verbs.WCRetryExcErr, fmt.Errorf("failover: QP %#x: the peer refused the fallback: %w", q.qpn, ErrFailed))
		return
	}
	if fromPeer && peer.pinned {
		_ = q.mach.pinEvent(EvPeerPinned) // the peer switched on purpose: no probing until it comes back
	}
	if fromPeer && peer.reply && rd != RoundIdle && !genAhead(q.defGen.Load(), peer.gen) {
		// A reply takes an incarnation past ours (the replier adds one to our notification's):
		// one that does not answers an earlier round, already ended by crossing
		// notifications (its count would be stale). Ours still waits for its own.
		return
	}
	if fromPeer && rd != RoundIdle {
		if st == SendHandshake {
			if done, _ := q.rkeysFirstLocked(peer, fromPeer, chain); done {
				t0 = q.c.now().UnixNano() // q.mu was released to read MR entries (rkcache.go)
				return
			}
		}
		_ = q.mach.roundEvent(EvRoundOver)
		q.nextGen = genAfter(q.defGen.Load(), peer.gen)
		if !peer.reply {
			// Both notified at once: each takes the later incarnation, plus one, and answers
			// too. The peer drops that reply when ours reached it first (its round is over);
			// when ours was lost it is the only answer the peer gets. Without it two sides
			// whose first reply was lost took each later reset round's notification for a
			// crossing one and waited for each other for ever, one incarnation apart, each
			// failed probe starting the next (simulation seed 19, a reply dropped).
			q.nextGen = max(q.nextGen, q.defGen.Load()) + 1
			_ = q.notifyLocked(true)
		}
		switch {
		case st == SendHandshake:
			q.repostSendsLocked(peer)
		case rd == RoundAwaitReset:
			if q.hsTimer != nil {
				q.hsTimer.Stop() // armed with the round (notifyresend.go)
			}
			q.resetDefaultLocked()
			q.roundOverForProbe(peer.reply) // an up event's round (probe_up.go)
		}
		return
	}
	if !chain && (st == SendHandshake || rd != RoundIdle) {
		return // this fallback is under way
	}
	if fromPeer {
		q.nextGen = genAfter(q.defGen.Load(), peer.gen) + 1
	}
	onFailed := chain && (st == SendFallback || st == SendWaitSignaled)
	sendPart := st == SendDefault || st == SendWaitDrained || onFailed
	recvPart := rs == RecvDefault || (chain && rs == RecvFallback)
	if !fromPeer && !chain && (sendPart || recvPart) {
		// The application's own error fails on any NIC: it gets it now, unretried.
		if class, wc := q.failureClassLocked(); class == classApp || (class == classFlush && q.flushCause() == classApp) {
			q.appErrorLocked(wc)
			return
		}
	}
	if !chain && q.cs().ctlDown() {
		// The set's control endpoint failed while we did not use it (ctlFailed): this
		// round runs on the next set, as a chained one.
		if j := q.nextSetLocked(); j >= 0 {
			q.chainLocked(j, peer, fromPeer)
			return
		}
	}
	done, keysGood := q.rkeysFirstLocked(peer, fromPeer, chain)
	if done {
		t0 = q.c.now().UnixNano() // q.mu was released to read MR entries (rkcache.go)
		return
	}
	if sendPart {
		// A new round for the send side: its phase timestamps start again (reset rounds,
		// which move nothing of ours, must not overwrite them). A fallback the peer's
		// notification, a link event or a failed post started has no error completion: it
		// counts from now.
		now := q.c.now().UnixNano()
		if e := q.tErr.Load(); fromPeer || e == 0 || e < q.tOK.Load() {
			q.tErr.Store(now)
		}
		if fromPeer {
			q.tCtl.Store(q.tPoll.Load())
		}
		q.tPrep.Store(0)
		q.tKept.Store(0)
		q.tRepost.Store(0)
		q.tOK.Store(0)
		q.tBusy.Store(0)
		q.tDrain.Store(0)
		q.tPost.Store(0)
		q.tCmd.Store(0)
		q.tPosted.Store(0)
		q.tFirst.Store(0)
		q.tPostFirst.Store(0)
		q.tPostPrep.Store(0)
	}
	// A probe in flight ends now: its QP goes to ERR below.
	q.probeRes.CompareAndSwap(0, 2)
	q.markSlowLocked()
	if err := q.prepareLocked(sendPart, recvPart, chain, fromPeer, keysGood); err != nil {
		if errors.Is(err, errRoundGone) {
			return
		}
		if errors.Is(err, errAppError) {
			_, wc := q.scanErrWCsLocked()
			q.appErrorLocked(wc)
			return
		}
		q.refuseLocked(err)
		if fromPeer {
			q.notifyRefusalLocked()
		}
		return
	}
	if !sendPart && !recvPart {
		q.c.resetRounds.Add(1)
	}
	if fromPeer {
		if sendPart || st == SendHandshake {
			q.repostSendsLocked(peer)
		} else {
			q.resetDefaultLocked()
		}
		return
	}
	_ = q.mach.roundEvent(EvNotified) // Idle here: a round under way returned above
	if st == SendHandshake {
		return // the reply reposts what waits since the round began (its timer runs)
	}
	if !sendPart {
		// Nothing of ours to repost: the reply only says the peer's default QP was reset.
		_ = q.mach.roundEvent(EvNothingToRepost)
		q.armResetWaitLocked() // the notification is sent again until it comes (notifyresend.go)
		return
	}
	q.armHandshakeLocked() // the notification goes once more halfway (notifyresend.go)
}

// stopDefaultLocked moves the default QP to ERR, so that nothing more executes on it. A dead
// device fails the command (EIO) and executes nothing anyway. Its EIO may come before SHIFT
// read the device's DEVICE_FATAL: a link event (the ports of a dead NIC go down) or a flush
// started this round first (simulation seed 10,000 with link events: the round was refused
// and both QPs failed). The kernel answers EIO for a device that is gone. A default QP in
// RESET (a reset round whose INIT failed on a device that died) executes nothing either, and
// RESET→ERR is no transition the kernel allows (ib_modify_qp_is_ok: EINVAL): the QP failed
// on it (simulation seed 265 with deep receive queues).
//
// A default QP that completed a WR with a transport error (retry or RNR retry exceeded, no
// response, a fatal error) is in ERR already: the NIC moved it there as it wrote that
// completion, flushing every WQE behind it and every receive, and flushes what is rung
// later. The command would only tell the kernel what the NIC did, at the cost of a firmware
// command on the fallback's critical path (14–39 µs p50 on the emulator, where it flushes
// the QP: the peer's answer in BenchmarkFallbackLatency, two temporary traces of
// 2026-11-30); resetDefaultLocked issues it off that path.
func (q *QP) stopDefaultLocked() error {
	if q.def.State() == verbs.QPStateReset || q.defErrByNICLocked() {
		return nil
	}
	t0 := q.c.now()
	err := q.def.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState)
	q.roundDeviceTime(&q.tCmd, t0)
	if err == nil || q.c.defDead.Load() {
		return nil
	}
	if !errors.Is(err, unix.EIO) {
		return fmt.Errorf("failover: QP %#x: move default QP to ERR: %w", q.qpn, err)
	}
	q.c.defDead.Store(true)
	return nil
}

// defErrByNICLocked reports whether the default QP's current incarnation completed a WR with
// a transport error (statusClass: the network's), which the NIC writes only as it moves the
// QP to ERR.
func (q *QP) defErrByNICLocked() bool {
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	for _, e := range q.errWCs {
		if statusClass(e.wc.Status) == classNetwork {
			return true
		}
	}
	return false
}

// prepareLocked is step 1 on either side: stop the default QP, collect its last
// completions, check that the outstanding WRs may be retransmitted, move the outstanding
// receives to the backup QP and send the notification with our receive counter. keysGood:
// the round's key look-up found every remote key of the default ring in the cache, each
// entry good (rkeysFirstLocked).
func (q *QP) prepareLocked(sendPart, recvPart, chain, reply, keysGood bool) error {
	bs := q.cs()
	b := bs.qp.Load()
	if b == nil || !bs.ready.Load() {
		return fmt.Errorf("failover: QP %#x: %w", q.qpn, ErrBackupNotReady)
	}
	// Nothing more may execute on the default QP: what landed is accounted by the drain and
	// the peer's counter, the rest is reposted.
	if q.fn != nil {
		_ = q.fn.Abort(fmt.Errorf("failover: QP %#x: default path failed", q.qpn))
	}
	if chain {
		_ = q.mach.event(wordRepost, EvChainSends)
	}
	q.defStopped = true
	if err := q.stopDefaultLocked(); err != nil {
		return err
	}
	if err := q.drainLocked(); err != nil {
		return err
	}
	// A failed post or a link event started this before the default QP's completions were
	// read: the drain may have found the application's own error behind it.
	if class, _ := q.scanErrWCsLocked(); class == classApp {
		return errAppError
	}
	if !sendPart && q.mach.sendState() != SendHandshake {
		// Our sends are on the backup: none of the default QP's WQEs is the application's
		// to repost. (In Handshake they wait in the default ring for the reply.)
		q.defFrom = q.def.SendProducer()
	}
	if st := q.mach.sendState(); sendPart && (st == SendDefault || st == SendWaitDrained) {
		// The send side leaves the default QP: the two-sided count goes on from its own.
		q.twoSided = q.def.TwoSidedPosted() + q.twoOff
	}
	// The initiator whose key look-up found every remote key good checks the WQEs' keys
	// after its notification (checkOpsLocked); any other round before it.
	late := sendPart && !reply && !chain && keysGood
	var err error
	if late {
		late, err = q.checkOpsLocked()
	}
	if !late && err == nil {
		err = q.checkSendsLocked()
	}
	if err != nil {
		return err
	}
	if recvPart {
		// Outstanding receives go to the backup QP behind its control RECV.
		// The log's entries are read in place: postRecvsBackupLocked copies what it posts,
		// and the receive gate is closed, so no post writes the log meanwhile.
		if n := int(q.rPosted.Load() - q.recvDone); n > 0 {
			from := q.recvDone
			if err := q.postRecvsBackupLocked(n, func(i int) verbs.RecvWR { return q.loggedRecv(from + uint64(i)) }); err != nil {
				return err
			}
		}
		q.rHeld = 0 // posted with the rest of the log's tail
		if q.mach.recvState() == RecvDefault {
			if _, err := q.mach.recvEvent(EvRecvMoved); err != nil {
				return err
			}
		}
	}
	if err := q.notifyLocked(reply); err != nil {
		return err
	}
	if sendPart {
		ev := EvFailure
		if chain {
			ev = EvChain
		}
		if _, err := q.mach.sendEvent(ev); err != nil {
			return err
		}
	} else if q.mach.sendState() == SendWaitSignaled {
		if _, err := q.mach.sendEvent(EvFailure); err != nil {
			return err
		}
	}
	if sendPart {
		q.tPrep.Store(q.c.now().UnixNano())
		q.tPostPrep.Store(q.tPost.Load())
	}
	if sendPart && !reply {
		// The reply's round reposts from the ring decoded here, while the notification is
		// on its way and the peer answers, rather than after the reply (defsKept), into a
		// log reserved here. An error here recurs there and fails the round then, unless
		// the check is still to come: then it withdraws the notification now.
		defs, err := q.defSendsLocked()
		if late && err == nil {
			err = q.checkKeptLocked(defs)
		}
		if late && err != nil {
			q.withdrawLocked(err)
			return errRoundGone
		}
		if err == nil {
			q.reserveLogLocked(len(defs), func(i int) int { return len(defs[i].wr.SGL) })
		}
		q.tKept.Store(q.c.now().UnixNano())
	}
	return nil
}

// withdrawLocked ends the initiator's round whose retransmission check failed after its
// notification (checkKeptLocked): the QP fails as a round that failed in Handshake does
// (failLocked: the WRs it holds complete with errors, the first with the status of the error
// that started the round), and a refusal without the reply flag tells the peer, which moved
// its side for the notification and would otherwise run on alone towards a QP that failed.
// A refusal that answers nothing fails the peer's QP however far its round got (roundLocked).
func (q *QP) withdrawLocked(err error) {
	_ = q.sendCtlLocked(ctlMsg{refused: true})
	status := verbs.WCRetryExcErr
	if class, wc := q.scanErrWCsLocked(); class == classNetwork && wc.Status != verbs.WCSuccess {
		status = wc.Status
	}
	q.failLocked(status, err)
}

// Notification immediate: the low 24 bits are the receive counter (modulo 2^24), the high 8
// the number of stale RECVs the peer must consume with fillers first.
const (
	countBits = 24
	countMask = 1<<countBits - 1
)

// delivered reports whether the two-sided WR numbered seq is among the first count the
// peer received (24-bit serial arithmetic).
func delivered(count, seq uint32) bool { return int32((count-seq)<<(32-countBits)) > 0 }

// drainLocked polls the default CQs until the default QP has no WQE left without a
// completion; the classifier accounts and buffers what it finds. It waits with q.mu released
// (pauseLocked): errRoundGone if the QP went meanwhile.
func (q *QP) drainLocked() error {
	deadline := q.c.now().Add(q.c.opts.DrainTimeout)
	pace := q.c.pacer()
	// Unsignaled WQEs that succeeded have no completion of their own and, with nothing
	// signaled behind them, would stay outstanding for ever: the drain marker (a signaled
	// NOP, flushed after every WQE before it) retires them. With the SQ full it cannot be
	// posted; then the drain waits for completions as before.
	if q.def.State() == verbs.QPStateErr {
		q.defOutstandingLocked()
		if n := len(q.outSends); n > 0 && q.outSends[n-1].Rung && !q.outSends[n-1].Completed {
			q.scq.mu.Lock()
			_ = q.def.PostDrainMarker(drainWRID)
			q.scq.mu.Unlock()
		}
	}
	var waitFrom int64 // when the drain first found WQEs without completion
	var dw drainWatch
	defer func() {
		if waitFrom != 0 {
			q.tDrain.Add(q.c.now().UnixNano() - waitFrom)
		}
	}()
	for {
		for _, cq := range []*CQ{q.scq, q.rcq} {
			cq.mu.Lock()
			err := cq.pollDefaultLocked()
			if err == nil {
				// What the peer delivered on the backup counts too (the receive counter).
				err = cq.pollBackupLocked()
			}
			cq.mu.Unlock()
			if err != nil {
				return fmt.Errorf("failover: QP %#x: drain: %w", q.qpn, err)
			}
		}
		q.defOutstandingLocked()
		q.outRecvs = q.def.OutstandingRecvs(q.outRecvs[:0])
		rung := 0
		for _, w := range q.outSends {
			if w.Rung && !w.Completed {
				// WQEs a failed fence withheld never execute and never complete; those the
				// provider holds after an error completion have theirs.
				rung++
			}
		}
		if h := testHookDrain.Load(); h != nil && (*h)(q) {
			if !q.pauseLocked(&pace) {
				return errRoundGone
			}
			continue // the test holds the flushes back
		}
		if rung == 0 && len(q.outRecvs) == 0 {
			return nil
		}
		if q.c.defDead.Load() {
			// A dead or hung device completes nothing more: what it wrote is polled
			// above; the WRs left are reposted, and the peer's receive counter says
			// which of the two-sided ones it delivered.
			return nil
		}
		if q.drainStalled(&dw, rung+len(q.outRecvs)) {
			return nil // the device hung (drainhang.go): dead from now on
		}
		if q.c.now().After(deadline) {
			return fmt.Errorf("failover: QP %#x: drain: %d sends and %d receives without completion after %v: %w",
				q.qpn, len(q.outSends), len(q.outRecvs), q.c.opts.DrainTimeout, verbs.ErrTimeout)
		}
		if waitFrom == 0 {
			waitFrom = q.c.now().UnixNano()
		}
		if !q.pauseLocked(&pace) {
			return errRoundGone
		}
	}
}

// notifyRefusalLocked answers the peer's notification with a refusal, so that its handshake
// fails now and not at HandshakeTimeout. Best effort: without a control QP the peer's
// timeout still ends it.
func (q *QP) notifyRefusalLocked() {
	if bs := q.cs(); bs.ep.Load() == nil || !bs.ready.Load() {
		return
	}
	_ = q.sendCtlLocked(ctlMsg{refused: true, reply: true})
}

// notifyLocked posts the control SEND carrying our receive counter and the stale RECVs the
// set's QP ever had (stale.go): a reply carries the incarnation this round gives both default
// QPs (nextGen), a notification ours.
func (q *QP) notifyLocked(reply bool) error {
	q.rcq.mu.Lock()
	m := ctlMsg{count: uint32(q.recvDone) & countMask, stale: q.cs().staleMarked, reply: reply, gen: uint32(q.defGen.Load()),
		pinned: q.mach.pinState().local() && !reply}
	q.rcq.mu.Unlock()
	if reply {
		m.gen = uint32(q.nextGen)
	}
	m.gen &= countMask
	m.recvOnly = q.recvOnly()
	q.toldRecvOnly = m.recvOnly
	return q.sendCtlLocked(m)
}

// sendCtlLocked sends m on the control endpoint of the backup set in use, to the peer's QP.
// On an endpoint that failed, or that a re-arm replaced meanwhile, nothing is sent and the
// QP learns of the failure as if the post had been flushed (ctlFailed, once this round
// released the QP's mutex).
func (q *QP) sendCtlLocked(m ctlMsg) error { return q.sendCtlOnLocked(int(q.cur.Load()), m) }

// sendCtlOnLocked is sendCtlLocked on the control endpoint of backup set i.
func (q *QP) sendCtlOnLocked(i int, m ctlMsg) error {
	bs := q.sets[i]
	ep := bs.ep.Load()
	if ep == nil {
		return fmt.Errorf("failover: QP %#x: post notification: %w", q.qpn, ErrBackupNotReady)
	}
	m.dst, m.src = bs.peerQPN.Load(), q.qpn
	t0 := q.c.now()
	err := ep.sendMsg(m)
	q.roundDeviceTime(&q.tPost, t0)
	if errors.Is(err, errCtlClosed) && bs.ep.Load() != ep {
		// A re-arm replaced the endpoint since it was loaded: lost with it (lostOnReplace).
		err = errCtlFailed
	}
	if errors.Is(err, errCtlFailed) {
		wc := verbs.WC{Status: verbs.WCWRFlushErr, WRID: ctrlWRID, QPNum: ep.qp.QPN()}
		q.c.eng.do(func() { q.ctlFailed(i, wc) })
		return nil
	}
	if err != nil {
		return fmt.Errorf("failover: QP %#x: post notification: %w", q.qpn, err)
	}
	return nil
}

// repostSendsLocked is the last step: the peer has received peerCount of our two-sided WRs.
// The outstanding WRs up to the last of those were delivered (their ACK was lost): they
// complete now (READs excepted: their response may be lost, so they are read again); the
// rest is reposted on the backup QP in order, followed by what the application posted
// during the handshake.
func (q *QP) repostSendsLocked(peer ctlMsg) {
	if q.hsTimer != nil {
		q.hsTimer.Stop()
	}
	_ = q.mach.roundEvent(EvRoundOver)
	peerCount := peer.count & countMask
	q.tRepost.Store(q.c.now().UnixNano())
	q.tCtl.Store(q.tPoll.Load())
	cands, err := q.repostCandidatesLocked()
	if err != nil {
		q.failLocked(verbs.WCGeneralErr, err)
		return
	}
	last := -1
	for c, r := range cands {
		if r.twoSided && delivered(peerCount, r.twoSeq&countMask) {
			last = c
		}
	}
	var done []verbs.WC
	resend := make([]*sendRec, 0, len(cands)+len(q.pending))
	reread := false // a READ up to last is read again: completions behind it wait for it
	for c := range cands {
		r := &cands[c]
		if c <= last && r.wr.Opcode != verbs.WRRDMARead {
			q.c.skipped.Add(1)
			switch {
			case r.signaled && reread:
				// Completed now, it would overtake the READ's completion, which the
				// application may take for the READ's data in place (completions are in
				// order on an RC QP). A zero-length WRITE on the backup stands in for it
				// and completes in order (heldWR).
				resend = append(resend, heldWR(r))
			case r.signaled:
				done = append(done, verbs.WC{WRID: r.wr.WRID, Status: verbs.WCSuccess, Opcode: wcOpcode(r.wr.Opcode), QPNum: q.qpn})
			}
			continue
		}
		if c <= last {
			reread = true
		}
		resend = append(resend, r)
	}
	q.defFrom = q.def.SendProducer()
	if len(done) > 0 {
		q.scq.mu.Lock()
		q.scq.buf = append(q.scq.buf, done...)
		q.scq.mu.Unlock()
		q.scq.raise()
	}
	if _, err := q.mach.sendEvent(EvPeerCount); err != nil {
		q.failLocked(verbs.WCGeneralErr, err)
		return
	}
	// The reposted WRs were counted when logged; postBackupLocked counts them again.
	recount := uint32(0)
	for _, r := range resend {
		if r.twoSided {
			recount++
		}
	}
	if err := q.postFillersLocked(peer.stale); err != nil {
		if !errors.Is(err, errRoundGone) {
			q.failLocked(verbs.WCGeneralErr, err)
		}
		return
	}
	for i := range q.pending {
		resend = append(resend, &q.pending[i]) // each record keeps its inline payload
	}
	q.pending = nil
	q.twoSided -= recount
	q.reserveLogLocked(len(resend), func(i int) int { return len(resend[i].wr.SGL) })
	// One WR at a time, waiting for room in the backup SQ when it is full (a full SQ refuses
	// a list part-way): the default ring's WQEs copied, the backup log's and the handshake's
	// WRs posted.
	for len(resend) > 0 {
		r := resend[0]
		err := q.repostOneLocked(r)
		if errors.Is(err, verbs.ErrSQFull) {
			err = q.retryRoomLocked(err, func() error { return q.repostOneLocked(r) })
		}
		if errors.Is(err, errRoundGone) {
			return
		}
		if err != nil {
			q.failLocked(verbs.WCGeneralErr, err)
			var ws []verbs.SendWR
			for _, r := range resend {
				ws = append(ws, r.wr)
			}
			q.synthErrorsLocked(ws, verbs.WCWRFlushErr)
			return
		}
		if q.tFirst.Load() == 0 {
			q.tFirst.Store(q.c.now().UnixNano())
			q.tPostFirst.Store(q.tPost.Load())
		}
		q.c.reposted.Add(1)
		q.stats.reposted.Add(1)
		resend = resend[1:]
	}
	q.tPosted.Store(q.c.now().UnixNano())
	q.c.fallbacks.Add(1)
	q.stats.fallbacks.Add(1)
	q.resetDefaultLocked()
}

// repostCandidatesLocked lists, in posting order, the send WRs without a known completion:
// after a backup failed (chainRepost), those still on it first, older than any on the
// default QP; then the default ring's (defSendsLocked). The backup log is emptied: what is
// reposted is logged again as it goes to the new backup.
func (q *QP) repostCandidatesLocked() ([]sendRec, error) {
	var out []sendRec
	if q.mach.repostState() == RepostChain {
		q.fifoMu.Lock()
		out = append(out, q.bkLog...)
		q.bkLog = nil
		q.fifoMu.Unlock()
		_ = q.mach.event(wordRepost, EvRepostTaken)
	}
	defs, err := q.defSendsLocked()
	if len(out) == 0 {
		return defs, err // read only: the list is kept for the next listing (defsKept)
	}
	return append(out, defs...), err
}

// repostOneLocked posts r on the backup QP in use: copied from the default ring, a stand-in,
// or posted from its record. The time inside the provider's post or doorbell is the round's
// device time (tPost).
func (q *QP) repostOneLocked(r *sendRec) error {
	switch {
	case r.held:
		return q.postHeldLocked(r)
	case r.fromDef:
		return q.copyToBackupLocked(r)
	}
	return q.postBackupOnLocked([]verbs.SendWR{r.wr}, true)
}

// withRoomLocked runs post (one WR on the backup QP) again while the backup SQ is full,
// polling the send CQ so that completed WQEs free their slots, for at most DrainTimeout. It
// waits with q.mu released (pauseLocked): errRoundGone if the QP went meanwhile.
func (q *QP) withRoomLocked(post func() error) error { return q.retryRoomLocked(post(), post) }

// retryRoomLocked is withRoomLocked after a first post that returned err: the repost's
// common case, a post with room, makes no closure, deadline or pacer.
func (q *QP) retryRoomLocked(err error, post func() error) error {
	deadline := q.c.now().Add(q.c.opts.DrainTimeout)
	pace := q.c.pacer()
	for {
		if err == nil || !errors.Is(err, verbs.ErrSQFull) || q.c.now().After(deadline) {
			return err
		}
		q.scq.mu.Lock()
		_ = q.scq.pollBackupLocked()
		q.scq.mu.Unlock()
		if !q.pauseLocked(&pace) {
			return errRoundGone
		}
		err = post()
	}
}

// resetDefaultLocked resets the default QP (its last completions polled first, so they are
// classified against this incarnation), gives it its control RECV in INIT and starts the
// probe goroutine that reconnects it.
func (q *QP) resetDefaultLocked() {
	if s := q.def.State(); s != verbs.QPStateReset && s != verbs.QPStateErr {
		q.defStopped = true
		_ = q.def.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState)
	}
	deadline := q.c.now().Add(2 * time.Second)
	pace := q.c.pacer()
	var dw drainWatch
	for {
		q.pollDefaultCQsLocked()
		q.defOutstandingLocked()
		q.outRecvs = q.def.OutstandingRecvs(q.outRecvs[:0])
		rung := 0
		for _, w := range q.outSends {
			if w.Rung && !w.Completed {
				rung++
			}
		}
		if (rung == 0 && len(q.outRecvs) == 0) || q.c.defDead.Load() || q.c.now().After(deadline) {
			break
		}
		if q.drainStalled(&dw, rung+len(q.outRecvs)) {
			break // the device hung (drainhang.go)
		}
		if !q.pauseLocked(&pace) {
			return // the QP is gone: nothing to reset
		}
	}
	q.scq.mu.Lock()
	if q.rcq != q.scq {
		q.rcq.mu.Lock()
	}
	_ = q.def.Reset()
	q.defMode = defTracked
	q.fifoMu.Lock()
	q.dSendKinds = q.dSendKinds[:0]
	q.dRecvKinds = q.dRecvKinds[:0]
	if !q.peerRecvOnly {
		q.dRecvKinds = append(q.dRecvKinds, kindCtrl)
	}
	q.failQueued = false
	q.shiftErrSeen = false
	q.defStopped = false
	q.injHit.Store(false) // the injected error, if any, was this incarnation's
	q.errWCs = nil
	q.fifoMu.Unlock()
	q.defGen.Store(max(q.nextGen, q.defGen.Load()+1))
	q.nextGen = 0
	if q.rcq != q.scq {
		q.rcq.mu.Unlock()
	}
	q.scq.mu.Unlock()
	q.tracked = true
	ia := q.attr
	ia.Access = resetAccess(ia.Access)
	if err := verbs.ToInit(q.def, ia); errors.Is(err, unix.EIO) {
		// The device died (its DEVICE_FATAL may not be read yet): the QP stays in RESET,
		// and a dead device is not probed, as prepareLocked finds when its ERR fails so.
		q.c.defDead.Store(true)
	} else if err == nil {
		if !q.peerRecvOnly { // the peer's recovery notification lands here (recvonly.go)
			q.rcq.mu.Lock()
			err = q.def.PostRecvInternal([]verbs.RecvWR{{WRID: ctrlWRID}})
			q.rcq.mu.Unlock()
		}
		if err != nil {
			q.fifoMu.Lock()
			q.dRecvKinds = q.dRecvKinds[:0]
			q.fifoMu.Unlock()
		}
		// The responder comes up at once: the peer, reset in the same round, may probe
		// before our probe goroutine reconnects the requester, and a probe that meets a
		// QP in INIT is dropped and fails after its retries (one more round each time).
		// The peer's requester of the previous incarnation is in ERR (it notified us after
		// stopping it), so only packets of the new incarnation can arrive.
		_ = q.toRTRLocked()
	}
	q.respRefused.Store(false) // the refusal was the previous incarnation's
	if !q.c.defDead.Load() {
		q.startProbeLocked() // a dead device is not probed: it will not come back
	}
}

func wcOpcode(op verbs.WROpcode) verbs.WCOpcode {
	switch op {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		return verbs.WCRDMAWrite
	case verbs.WRRDMARead:
		return verbs.WCRDMARead
	case verbs.WRAtomicCmpAndSwp:
		return verbs.WCCompSwap
	case verbs.WRAtomicFetchAdd:
		return verbs.WCFetchAdd
	default:
		return verbs.WCSend
	}
}

// refuseLocked ends a fallback that must not happen: the application gets the default QP's
// completions as they are (the original error first), as without SHIFT.
func (q *QP) refuseLocked(err error) {
	// A failed QP stays on the slow path for good (pass-through of its completions).
	q.markSlowLocked()
	q.c.refused.Add(1)
	q.stats.refused.Add(1)
	q.failErr = err
	if q.mach.sendState() != SendFailed {
		_, _ = q.mach.sendEvent(EvFatal)
	}
	if q.mach.recvState() != RecvFailed {
		_, _ = q.mach.recvEvent(EvFatal)
	}
	// The default QP may still be healthy (a refused notification from the peer): stop it so
	// its WRs complete with errors the application sees.
	q.defStopped = true
	_ = q.def.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState)
	q.passThroughLocked()
	q.flushDeadLocked() // a dead device flushes nothing (deadflush.go)
	q.giveUpSetLocked()
}

// failBackup handles an error completion of backup set f.set: the backup path is gone too.
// The QP moves to the next backup when one is connected (chainLocked); without one it fails.
func (q *QP) failBackup(f bkFail) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failBackupLocked(f)
}

// failBackupLocked is failBackup with q.mu held.
func (q *QP) failBackupLocked(f bkFail) {
	if int(q.cur.Load()) != f.set {
		return // a set already left behind
	}
	if st := q.mach.sendState(); st != SendFailed && !q.appErr {
		if j := q.nextSetLocked(); j >= 0 {
			q.chainLocked(j, ctlMsg{}, false)
			return
		}
	}
	wc := f.wc
	which := "backup QP"
	if ep := q.sets[f.set].ep.Load(); ep != nil && wc.QPNum == ep.qp.QPN() {
		which = "control QP"
	}
	q.failLocked(wc.Status, fmt.Errorf("failover: QP %#x: %s %#x (backup %d) failed: %v (wr_id %#x, in send state %v)",
		q.qpn, which, wc.QPNum, f.set, wc.Status, wc.WRID, q.mach.sendState()))
}

// giveUpSetLocked stops the backup set in use for good: its WQEs complete with errors that
// the application gets, those polled already first. The set's stash is handed over until a
// look under fifoMu finds it empty and marks the set given up in the same critical section:
// a poller that finds the mark pushes its error completions itself, and all it stashed
// before is pushed by then, so the application gets them in completion order (marked first,
// a completion polled meanwhile could be pushed ahead of the stash).
func (q *QP) giveUpSetLocked() {
	bs := q.cs()
	if b := bs.qp.Load(); b != nil {
		_ = b.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState)
	}
	for {
		q.fifoMu.Lock()
		stash := bs.stash
		bs.stash = nil
		if len(stash) == 0 {
			bs.gaveUp = true
			q.fifoMu.Unlock()
			break
		}
		for _, o := range stash {
			if o.wc.Opcode&verbs.WCRecv == 0 {
				q.retireBkLogTo(o.wc.WRID) // reported now: not for flushDeadSetLocked
			}
		}
		q.fifoMu.Unlock()
		q.pushStash(bs, stash)
	}
	q.flushDeadSetLocked(bs) // a dead device flushes nothing (bkdead.go)
}

// pushStash gives the application the error completions a set held back.
func (q *QP) pushStash(bs *bkSet, stash []ownedWC) {
	for _, o := range stash {
		o.cq.mu.Lock()
		if o.wc.Opcode&verbs.WCRecv != 0 {
			// Counted as pollBackupDevLocked counts a receive flushed on a set given up, or
			// flushDeadSetLocked would complete it again (TestDeadBackupAfterFlushes).
			if q.popKind(&bs.recvKinds) != kindApp {
				o.cq.mu.Unlock()
				continue
			}
			q.recvDone++
		}
		o.cq.pushLocked(o.wc)
		closeGate(o.cq.gate)
		o.cq.mu.Unlock()
		o.cq.raise()
	}
}

// failLocked fails a QP whose fallback started: the backup QP is stopped (its WQEs complete
// with errors the application gets), and the sends not reposted yet complete with status
// (the first) and flush errors.
func (q *QP) failLocked(status verbs.WCStatus, err error) {
	st := q.mach.sendState()
	if st == SendFailed || st == SendDefault {
		if st == SendDefault {
			q.refuseLocked(err)
		}
		return
	}
	q.failOnLocked(status, err)
	q.c.refused.Add(1)
	q.stats.refused.Add(1)
}

// failOnLocked is failLocked past its check of the state (st neither Default nor Failed),
// without counting the QP as refused (the application's Modify to ERR: appstop.go).
func (q *QP) failOnLocked(status verbs.WCStatus, err error) {
	st := q.mach.sendState()
	if q.hsTimer != nil {
		q.hsTimer.Stop() // a failed handshake waits for nothing more
	}
	q.failErr = err
	// The states first: an application that polled the errors below reads Failed (as
	// appEndLocked orders it). TestDeadBackupFailedFlushes read Handshake once, in make test.
	_, _ = q.mach.sendEvent(EvFatal)
	if q.mach.recvState() != RecvFailed {
		_, _ = q.mach.recvEvent(EvFatal)
	}
	q.giveUpSetLocked()
	if st == SendHandshake {
		var ws []verbs.SendWR
		cands, _ := q.repostCandidatesLocked() // what could be read back
		for _, r := range cands {
			ws = append(ws, r.wr)
		}
		q.defFrom = q.def.SendProducer()
		ws = append(ws, q.pendingWRs()...)
		q.pending = nil
		q.deferErrsLocked(errorWCs(ws, status, q.qpn)) // after the backup's (stopwithheld.go)
	}
}

// errorWCs is an error completion for each WR of ws: the first with status, the rest flushed
// (as a QP in ERR reports them).
func errorWCs(ws []verbs.SendWR, status verbs.WCStatus, qpn uint32) []verbs.WC {
	wcs := make([]verbs.WC, 0, len(ws))
	for i, w := range ws {
		s := verbs.WCWRFlushErr
		if i == 0 {
			s = status
		}
		wcs = append(wcs, verbs.WC{WRID: w.WRID, Status: s, QPNum: qpn})
	}
	return wcs
}

// synthErrorsLocked gives the application errorWCs(ws, status) at once.
func (q *QP) synthErrorsLocked(ws []verbs.SendWR, status verbs.WCStatus) {
	if len(ws) == 0 {
		return
	}
	q.scq.mu.Lock()
	q.scq.buf = append(q.scq.buf, errorWCs(ws, status, q.qpn)...)
	q.scq.mu.Unlock()
	q.scq.raise()
}
