package failover

import (
	"fmt"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// A round's notification, or the peer's reply, can be lost without anything on this side
// failing: the peer drops a message for a QP whose backup set is not (or not yet) connected
// to ours (deliver), and a reply can be lost the same way. Losses with a control endpoint
// that failed are handled where the endpoint fails (ctlFailed, resendRefusals); these are
// not. So the notification is sent again while the round waits:
//
//   - a handshake (our sends wait for the peer's count) sends it once more halfway through
//     HandshakeTimeout, and fails the QP at its end as before (the peer is taken for gone);
//   - a reset round (RoundAwaitReset: nothing of ours to repost, only the default QPs to
//     reset) sends it again every HandshakeTimeout until the reply, or a crossing
//     notification of the peer's, ends the round. Nothing of the application's waits on such
//     a round, so nothing failed it: before, the QP stayed on the backup for good, without
//     probing.
//
// Sending it again is safe whatever happened to the first one. If the peer never had it, the
// second is its first. If the peer had it and its reply was lost, the peer takes the second
// for a new round (its own sends, if any, are on the backup since the first: a reset round
// for it): it resets once more and replies with an incarnation one later than the lost
// reply's, which we take (genAfter), so both count the same resets; its receive counter is
// the same, as our sends wait meanwhile. If the first reply was only late and arrives after
// the second notification, we act on it and drop the second reply as a duplicate
// (roundLocked): the sides then differ by one incarnation, their PSN ranges by psnStride, so
// the next probe is not executed, fails, and its reset round brings the counts together
// again. No WR of the application's runs on the default QPs meanwhile.

// armResetWaitLocked arms the wait of the reset round just notified (q.mu held).
func (q *QP) armResetWaitLocked() {
	seq := q.newRoundWaitLocked()
	q.hsTimer = q.c.clk.AfterFunc(q.c.opts.HandshakeTimeout, func() {
		q.c.eng.do(func() { q.resetWaitExpired(seq) })
	})
}

// resetWaitExpired sends the notification of reset round seq again if it still waits for its
// reply (engine), and waits again.
func (q *QP) resetWaitExpired(seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed || q.roundWait != seq || q.mach.roundState() != RoundAwaitReset || q.failedSide() {
		return // the round ended, or another one armed its own wait
	}
	q.resendLocked()
	q.armResetWaitLocked()
}

// armHandshakeLocked arms the handshake's timer: the notification goes once more halfway
// through HandshakeTimeout, and the QP fails at its end.
func (q *QP) armHandshakeLocked() {
	seq := q.newRoundWaitLocked()
	half := q.c.opts.HandshakeTimeout / 2
	q.hsTimer = q.c.clk.AfterFunc(half, func() {
		q.c.eng.do(func() { q.handshakeHalf(seq, q.c.opts.HandshakeTimeout-half) })
	})
}

// handshakeHalf is the handshake's halfway point: still waiting, it sends the notification
// again and waits the rest of HandshakeTimeout.
func (q *QP) handshakeHalf(seq uint64, rest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed || q.roundWait != seq || q.mach.sendState() != SendHandshake || q.mach.roundState() != RoundAwait {
		return
	}
	q.resendLocked()
	q.hsTimer = q.c.clk.AfterFunc(rest, func() {
		q.c.eng.do(func() { q.handshakeExpired(seq) })
	})
}

// handshakeExpired fails the QP whose handshake seq got no reply within HandshakeTimeout.
func (q *QP) handshakeExpired(seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.roundWait == seq && q.mach.sendState() == SendHandshake && !q.destroyed {
		q.failLocked(verbs.WCRetryExcErr, fmt.Errorf("failover: QP %#x: no reply from the peer within %v", q.qpn, q.c.opts.HandshakeTimeout))
	}
}

// newRoundWaitLocked stops the timer of the wait before and numbers the new one: a timer
// that fires for an earlier wait does nothing.
func (q *QP) newRoundWaitLocked() uint64 {
	if q.hsTimer != nil {
		q.hsTimer.Stop()
	}
	q.roundWait++
	return q.roundWait
}

// resendLocked sends the round's notification again. On an endpoint that failed meanwhile
// nothing is sent and the round moves to the next set later (ctlFailed, on the engine: its
// round arms a wait of its own, and this one's timer then finds its number stale); without
// an endpoint ready the wait goes on.
func (q *QP) resendLocked() {
	if q.notifyLocked(false) == nil {
		q.c.notifyResent.Add(1)
	}
}
