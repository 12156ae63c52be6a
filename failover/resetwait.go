package failover

// A reset round (RoundAwaitReset: nothing of ours to repost, only the default QPs to reset)
// waits for the peer's reply before it resets our default QP and lets the probe run again.
// Its notification can be lost without anything on this side failing: the peer drops a
// message for a QP whose backup set is not (or no longer) connected to ours (deliver), and a
// reply can be lost the same way. Nothing of the application's waits on such a round, so no
// handshake timer failed it, and the QP then stayed on the backup for good: it never probed
// again. The round's notification is therefore sent again every HandshakeTimeout until the
// reply (or a crossing notification of the peer's) ends the round.
//
// Sending it again is safe whatever happened to the first one. If the peer never had it, the
// second is its first. If the peer had it and its reply was lost, the peer takes the second
// for a new round: it resets once more and replies with an incarnation one later than the
// lost reply's, which we take (genAfter), so both count the same resets. If the first reply
// was only late and arrives after all, we reset on it and drop the second reply as a
// duplicate (roundLocked): the two sides then differ by one incarnation, their PSN ranges
// by psnStride, so the next probe is not executed, fails, and its reset round brings the
// counts together again. No WR of the application's runs on the default QPs meanwhile.

// armResetWaitLocked arms the wait of the reset round just notified (q.mu held).
func (q *QP) armResetWaitLocked() {
	if q.hsTimer != nil {
		q.hsTimer.Stop()
	}
	q.resetWait++
	seq := q.resetWait
	q.hsTimer = q.c.clk.AfterFunc(q.c.opts.HandshakeTimeout, func() {
		q.c.eng.do(func() { q.resetWaitExpired(seq) })
	})
}

// resetWaitExpired sends the notification of reset round seq again if it still waits for its
// reply (engine), and waits again.
func (q *QP) resetWaitExpired(seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed || q.resetWait != seq || q.mach.roundState() != RoundAwaitReset || q.failedSide() {
		return // the round ended, or another one armed its own wait
	}
	q.c.resetsResent.Add(1)
	// On an endpoint that failed meanwhile nothing is sent and the round moves to the next
	// set (ctlFailed); without one ready it waits for the next period.
	_ = q.notifyLocked(false)
	if q.mach.roundState() == RoundAwaitReset && !q.destroyed {
		q.armResetWaitLocked()
	}
}
