package failover

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Posts that meet a transition (issue 12 §5). A post whose gate is closed takes the slow path
// under q.mu. While a transition holds q.mu it may be in the kernel: a round moving the
// default QP to ERR or resetting and reconnecting it (modify_qp, a firmware command on a
// ConnectX), a probe, the watchdog. A post used to wait for that on the application's thread.
// Now a post that cannot take q.mu at once (TryLock) leaves its WRs in the QP's inbox, under a
// mutex of its own that is never held across a system call, and returns; the engine posts
// them once the holder is done (drainInbox), where the state then says, as it posts the WRs
// held while a round waits (roundwait.go). A WR it then cannot post (the QP failed meanwhile)
// completes with an error, as a held one does: the call had returned already.
//
// A post that the default QP refuses because it is in ERR before any completion told SHIFT
// of the failure uses the inbox too (inboxUnseen): the drain falls the QP back first, so the
// application's thread never waits for a fallback round.
//
// A post first tries for a while (lockTries): most holders of q.mu hold it for a moment
// without I/O (the watchdog's look, a probe's check, another thread's post), and a post that
// waits that long is cheaper than one the engine posts later.
//
// Order: once the inbox holds a send (a receive), every later post of that side goes there
// too until the engine has posted it, and no gate of that side opens: a post on a fast path
// would overtake it. A gate opening skipped for that reason (want) is done by the drain. The
// entries own copies of their SGLs and inline payloads (heldSend): the application may reuse
// both once its call returns.

// lockTries is how many times a post yields and tries q.mu again before it uses the inbox:
// a few tens of µs, more than a critical section without I/O (about 1 µs, 10 under the race
// detector), less than a modify_qp on a ConnectX.
const lockTries = 64

// tryLockPost takes m (TryLock, or tryLockRecv for a receive) within lockTries; false: a
// transition holds it.
func tryLockPost(m *qpMutex, recv bool) bool {
	for i := 0; ; i++ {
		if recv && m.tryLockRecv() || !recv && m.TryLock() {
			return true
		}
		if i == lockTries {
			return false
		}
		runtime.Gosched() // the holder may be waiting for this processor
	}
}

// inbox is a QP's posts left for the engine.
type inbox struct {
	mu     sync.Mutex
	sends  []sendRec
	recvs  []verbs.RecvWR
	queued bool   // drainInbox is queued on the engine
	drain  func() // q.drainInbox, made once
	// wantSend, wantRecv: a gate opening was skipped while the inbox held that side's WRs.
	wantSend, wantRecv bool
	// keyWait: the sends wait for a read of their remote keys (keywait.go); keysRead: it
	// ended, and the next batch of sends the drain takes is posted with what it found.
	keyWait, keysRead bool
	// nSend, nRecv count the WRs left and not yet posted (those the drain took included):
	// written under mu, read without it by posters.
	nSend, nRecv atomic.Int32
}

// inboxSends leaves wrs in the inbox. It reports false, leaving nothing, when the inbox holds
// no send and the send gate is no longer closed: the caller starts its post again.
func (q *QP) inboxSends(wrs []verbs.SendWR) bool {
	b := &q.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nSend.Load() == 0 && q.sendGate.state.Load() != gateClosed {
		return false
	}
	for _, w := range wrs {
		b.sends = append(b.sends, heldSend(w))
	}
	b.nSend.Add(int32(len(wrs)))
	q.queueDrainBoxed()
	q.c.inboxed.Add(1)
	return true
}

// inboxRecvs is inboxSends for receives.
func (q *QP) inboxRecvs(wrs []verbs.RecvWR) bool {
	b := &q.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nRecv.Load() == 0 && q.recvGate.state.Load() != gateClosed {
		return false
	}
	for _, w := range wrs {
		w.SGL = append([]verbs.SGE(nil), w.SGL...)
		b.recvs = append(b.recvs, w)
	}
	b.nRecv.Add(int32(len(wrs)))
	q.queueDrainBoxed()
	q.c.inboxed.Add(1)
	return true
}

// queueDrainBoxed queues drainInbox on the engine unless it is queued (q.box.mu held).
func (q *QP) queueDrainBoxed() {
	if !q.box.queued {
		q.box.queued = true
		if q.box.drain == nil {
			q.box.drain = q.drainInbox
		}
		q.c.eng.do(q.box.drain)
	}
}

// drainInbox posts what the inbox holds, on the engine.
func (q *QP) drainInbox() {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := &q.box
	for {
		b.mu.Lock()
		sends, recvs := b.sends, b.recvs
		read := false
		if b.keyWait {
			sends = nil // a read of their remote keys runs: its end queues the drain (keywait.go)
		} else {
			b.sends = nil
			read, b.keysRead = b.keysRead, false // the read's batch: posted with what it found
		}
		b.recvs = nil
		if len(sends) == 0 && len(recvs) == 0 {
			b.queued = false
			b.mu.Unlock()
			q.inboxOpenLocked()
			return
		}
		b.mu.Unlock()
		if !q.destroyed {
			q.postInboxRecvsLocked(recvs) // may fall back first, and the QP be destroyed meanwhile
		}
		if !q.destroyed {
			q.postInboxSendsLocked(sends, read)
		}
		b.mu.Lock()
		b.nSend.Add(-int32(len(sends)))
		b.nRecv.Add(-int32(len(recvs)))
		b.mu.Unlock()
	}
}

// postInboxSendsLocked posts recs where the state says: behind the sends already held (a
// round waits, a handshake runs), else one at a time, waiting for room.
func (q *QP) postInboxSendsLocked(recs []sendRec, keysRead bool) {
	fellBack := false
	for i := range recs {
		if !fellBack && q.defFailedUnseenLocked() {
			// The default QP failed before SHIFT saw it (a post found it so and left its
			// WRs here: inboxUnseen): fall back first.
			fellBack = true
			q.fallbackLocked(ctlMsg{}, false)
			if q.destroyed {
				return
			}
		}
		if q.mach.holdState() == HoldPosts || q.mach.sendState() == SendHandshake || len(q.pending) > 0 {
			q.pending = append(q.pending, recs[i:]...)
			return
		}
		if !keysRead && q.awaitKeysLocked(recs[i:]) {
			return // back in the inbox until their remote keys were read (keywait.go)
		}
		ws := []verbs.SendWR{recs[i].wr}
		err := q.withRoomLocked(func() error { return q.postSendLocked(ws) })
		runtime.KeepAlive(&recs[i]) // its inline payload, read by the post
		if errors.Is(err, errRoundGone) {
			return
		}
		if err != nil {
			rest := make([]verbs.SendWR, 0, len(recs)-i)
			for j := i; j < len(recs); j++ {
				rest = append(rest, recs[j].wr)
			}
			status := verbs.WCWRFlushErr
			if errors.Is(err, ErrBackupNotReady) {
				// A remote key the store did not give (keywait.go): the QP fails closed, as a
				// round that cannot map a key does, with what the link's failure would have
				// given without SHIFT.
				q.failLocked(verbs.WCRetryExcErr, err)
				status = verbs.WCRetryExcErr
			}
			q.synthErrorsLocked(rest, status)
			return
		}
	}
	if q.mach.sendState() == SendFallback {
		q.openBackupLocked(&q.sendGate, true)
	}
}

// postInboxRecvsLocked posts recvs where the state says.
func (q *QP) postInboxRecvsLocked(recvs []verbs.RecvWR) {
	if len(recvs) == 0 {
		return
	}
	if q.recvFailedUnseenLocked() {
		// The default QP failed before SHIFT saw it (inboxUnseenRecvs): fall back first.
		q.fallbackLocked(ctlMsg{}, false)
		if q.destroyed {
			return
		}
	}
	var err error
	if q.mach.holdState() == HoldPosts {
		err = q.holdRecvsLocked(recvs)
	} else {
		err = q.postRecvLocked(recvs)
	}
	if err != nil {
		q.synthRecvErrorsLocked(recvs)
	}
}

// gateMayOpen reports whether gate g of q may open now: the inbox holds nothing of its side.
// Otherwise the opening is left to the drain (want). q.mu held.
func (q *QP) gateMayOpen(g *postGate) bool {
	b := &q.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if g == &q.sendGate {
		if b.nSend.Load() != 0 {
			b.wantSend = true
			return false
		}
		return true
	}
	if b.nRecv.Load() != 0 {
		b.wantRecv = true
		return false
	}
	return true
}

// inboxOpenLocked opens the gates whose opening waited for the inbox, if q is still on the
// fast path (q.mu held, the inbox empty).
func (q *QP) inboxOpenLocked() {
	b := &q.box
	b.mu.Lock()
	send, recv := b.wantSend && b.nSend.Load() == 0, b.wantRecv && b.nRecv.Load() == 0
	if send {
		b.wantSend = false
	}
	if recv {
		b.wantRecv = false
	}
	b.mu.Unlock()
	if q.slow || q.destroyed || len(q.pending) > 0 {
		return // the next recovery opens them (reopenLocked)
	}
	if send {
		q.openSendLocked()
	}
	if recv {
		q.recvGate.reopen()
	}
}
