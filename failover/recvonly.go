package failover

import "github.com/shift-rdma/shift/provider/verbs"

// Receive-only QPs after a recovery. perftest's bandwidth servers never move their QP to RTS:
// it receives and never sends. Such a QP does not probe (recover.go: it has no sends to bring
// back and no first send PSN), so its send side stayed in Fallback after a recovery; and it
// cannot send, on its default QP, the recovery notification that brings the peer's receive
// side back. The peer's receive side stayed on the backup, and its reset had left a control
// RECV for that notification at the head of its default RQ, so the peer stayed off the
// lock-free path, which needs both directions Default and no SHIFT WQE outstanding
// (TestReceiveOnlyPeer).
//
// Now every fallback notification says whether its sender is such a QP (ctlMsg.recvOnly), and
// a side whose peer is one posts no control RECV at its reset. Once its own receive side came
// back (the peer's recovery notification, recoverRecv), a QP never in RTS with nothing of its
// own on the backup returns its send side too (EvNeverSent: nothing it sent can be in flight,
// there is nothing to fence) and says so on the control QP (ctlMsg.neverSent, with its
// two-sided count and incarnation). The peer takes that as the recovery notification its
// receive side waits for: it polls its backup CQ up to that count (recvcount.go), marks what
// is left there stale and reposts its receives on the default QP; both QPs then reopen their
// fast paths (a receive-only QP's in RTR).
//
// The neverSent message can be lost like a round's (the peer drops a message for a QP whose
// set is not connected to the sender's: notifyresend.go), and then nothing else brings the
// peer's receive side back: it stayed on the backup, off its lock-free path, until the next
// failure. So the peer, once its send side is back (finishRecovery) with its receive side
// still on the backup and its peer receive-only, asks for it again every HandshakeTimeout,
// a few times (ctlMsg.neverSent with reply), and a receive-only QP whose sides are both back
// answers with its neverSent message again (TestReceiveOnlyPeer, "lost").
//
// An application that moves such a QP to RTS later: its sends after neverSent go to the
// default QP, where the peer's receives wait (or, until the peer's receive side came back,
// are RNR-NAKed and retried). One that does so before its receive side came back keeps its
// send side in Fallback and does not probe until the next round (toldRecvOnly: the peer's
// reset posted no control RECV for its recovery notification), as every receive-only QP did
// before.

// recvOnly reports whether the application never moved q to RTS.
func (q *QP) recvOnly() bool { return q.rtsAttr.State != verbs.QPStateRTS }

// neverSentBackLocked returns the send side of a receive-only QP whose receive side just came
// back, and tells the peer. q.mu held.
func (q *QP) neverSentBackLocked() {
	if !q.recvOnly() || q.mach.sendState() != SendFallback || q.mach.roundState() != RoundIdle ||
		q.mach.pinState() != PinNone || len(q.pending) > 0 {
		return
	}
	q.fifoMu.Lock()
	idle := q.sentNothingOn(q.cs())
	q.fifoMu.Unlock()
	if !idle {
		return
	}
	if _, err := q.mach.sendEvent(EvNeverSent); err != nil {
		return
	}
	_ = q.sendCtlLocked(q.neverSentMsgLocked())
}

// sentNothingOn reports whether nothing q sent is on backup set bs: no WR in the backup log,
// no send WQE of SHIFT's outstanding there (q.fifoMu held).
func (q *QP) sentNothingOn(bs *bkSet) bool { return len(q.bkLog) == 0 && len(bs.sendKinds) == 0 }

// neverSentMsgLocked is the neverSent message of q: its two-sided count and incarnation
// (q.mu held).
func (q *QP) neverSentMsgLocked() ctlMsg {
	return ctlMsg{neverSent: true, recvOnly: true, count: q.twoSided & countMask, gen: uint32(q.defGen.Load()) & countMask}
}

// neverSentAsks is how many times a QP asks for a receive-only peer's neverSent message.
const neverSentAsks = 3

// awaitingNeverSentLocked reports whether q, back on its default path, waits for its
// receive-only peer's neverSent message to bring its receive side back (q.mu held).
func (q *QP) awaitingNeverSentLocked() bool {
	return q.peerRecvOnly && !q.destroyed && q.mach.sendState() == SendDefault &&
		q.mach.recvState() == RecvFallback && q.mach.roundState() == RoundIdle
}

// armNeverSentWaitLocked starts the wait for the peer's neverSent message, asked for again
// asks more times (q.mu held).
func (q *QP) armNeverSentWaitLocked(asks int) {
	if asks <= 0 || !q.awaitingNeverSentLocked() {
		return
	}
	seq := q.newRoundWaitLocked() // a round's wait ends this one
	q.hsTimer = q.c.clk.AfterFunc(q.c.opts.HandshakeTimeout, func() {
		q.c.eng.do(func() { q.neverSentWaitExpired(seq, asks) })
	})
}

// neverSentWaitExpired asks the peer for its neverSent message if q still waits for it.
func (q *QP) neverSentWaitExpired(seq uint64, asks int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.roundWait != seq || !q.awaitingNeverSentLocked() {
		return
	}
	if q.sendCtlLocked(ctlMsg{neverSent: true, reply: true, gen: uint32(q.defGen.Load()) & countMask}) == nil {
		q.c.notifyResent.Add(1)
	}
	q.armNeverSentWaitLocked(asks - 1)
}

// neverSentAgainLocked answers the peer's request: a receive-only QP whose sides both came
// back sends its neverSent message again (q.mu held).
func (q *QP) neverSentAgainLocked() {
	if !q.recvOnly() || q.mach.sendState() != SendDefault || q.mach.recvState() != RecvDefault {
		return // not sent yet (neverSentDue sends it), or not such a QP
	}
	if q.sendCtlLocked(q.neverSentMsgLocked()) == nil {
		q.c.notifyResent.Add(1)
	}
}

// neverSentDue reports, as a SHIFT send of q completed on set bs (under its CQ's mutex),
// whether neverSentBackLocked should look at q again: a receive-only QP whose receive side
// came back while a filler of its was still on the backup, which the look then found busy,
// had nothing to look again later, and both QPs stayed off their default paths for ever
// (internal/sim: recovery seed 107651).
// It runs without q.mu, so it reads the application's last state (appState, atomic) where
// recvOnly reads the attributes Modify keeps under q.mu; neverSentBackLocked checks again.
func (q *QP) neverSentDue(bs *bkSet) bool {
	if verbs.QPState(q.appState.Load()) != verbs.QPStateRTR || q.mach.sendState() != SendFallback || q.mach.recvState() != RecvDefault {
		return false
	}
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	return q.sentNothingOn(bs)
}

// neverSentBack is neverSentBackLocked from the pollers' queue (runPending).
func (q *QP) neverSentBack() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.destroyed {
		q.neverSentBackLocked()
	}
}

// peerNeverSentLocked is the peer's neverSent message: our receive side returns as on a
// recovery notification, if the message is of our default QP's incarnation. q.mu held.
func (q *QP) peerNeverSentLocked(peer ctlMsg) {
	gen := q.defGen.Load()
	if peer.gen != uint32(gen)&countMask {
		return // a round moved on since: the receives stay where it put them
	}
	q.recoverRecvLocked(gen, peer.count&countMask) // reopens the fast path when all is back
}
