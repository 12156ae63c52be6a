package failover

import (
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// A receive side's recovery waits for the backup's last completions. The peer's recovery
// notification comes on the default NIC once its fence WR completed on the backup, so every
// message it sent there was received, but not necessarily completed on our backup CQ yet: an
// RC responder may acknowledge a message before its CQE is written, and the CQEs of two NICs
// reach host memory in no order relative to each other. Reading the receive counter right
// after one poll of the backup CQ took the messages still to complete for not received:
// their receives were marked stale and reposted on the default QP, and when the CQEs came
// they were dropped as fillers' (a message lost), while the next message landed in the lost
// one's buffer (TestNetnsRoCEv2Flapping/send: "receive 117 ... message seq 118", about one run
// in 30 under load). The notification's immediate now carries how many two-sided messages
// the peer had sent up to its fence WR, in the receive counter's numbering (24 bits), and the
// recovery polls the backup CQ until the counter reaches it (TestRecoveryWaitsForLateCQE).
//
// The wait is bounded: a backup NIC that died after acknowledging would never write the
// CQEs (their messages are lost as they would be without SHIFT), and the peer, back on the
// default QP, sends into receives not yet reposted there (RNR until they are).

// recvLateBound is how long a recovery waits for backup completions the peer's count says are
// owed: the drain's hang bound, or half the peer's HandshakeTimeout with the watchdog off.
func (c *Context) recvLateBound() time.Duration {
	if b := c.drainHangBound(); b > 0 {
		return b
	}
	return c.opts.HandshakeTimeout / 2
}

// recoverableLocked reports whether a recovery notification that arrived on incarnation gen
// still applies: the receive side is in Fallback and the default QP is that incarnation and
// connected.
func (q *QP) recoverableLocked(gen uint64) bool {
	s := q.def.State()
	return q.mach.recvState() == RecvFallback && gen == q.defGen.Load() && !q.destroyed &&
		(s == verbs.QPStateRTS || s == verbs.QPStateRTR)
}

// awaitReceivedLocked polls the backup CQs until the receive counter reaches sent, the
// peer's count at its fence. It reports false when the recovery no longer applies (the QP
// was destroyed, the context is closing, or a round moved the default QP on while q.mu was
// released: roundwait.go); past the bound it gives up waiting and reports true.
func (q *QP) awaitReceivedLocked(gen uint64, sent uint32) bool {
	pace := q.c.pacer()
	var deadline time.Time
	for {
		q.rcq.mu.Lock()
		_ = q.rcq.pollBackupLocked()
		count := uint32(q.recvDone) & countMask
		q.rcq.mu.Unlock()
		if count == sent || delivered(count, sent) { // every message counted was received
			return true
		}
		now := q.c.now()
		if deadline.IsZero() {
			deadline = now.Add(q.c.recvLateBound())
			q.c.recvLateWaits.Add(1)
		} else if now.After(deadline) {
			q.c.recvLateTimeouts.Add(1)
			return true
		}
		if !q.pauseLocked(&pace) || !q.recoverableLocked(gen) {
			return false
		}
	}
}
