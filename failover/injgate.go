package failover

import "github.com/shift-rdma/shift/internal/asymfence"

// Failure injection behind the send gate (issue 12 §1). The fast PostSend does not read the
// injection words: an armed injection keeps the send gates of the QPs it may fall on closed,
// so their posts take the locked path, whose postDefaultVia counts the countdown down and
// corrupts the WR it reaches. Arming closes them:
//   - Context.Inject closes them before it returns, so the caller's next post is counted;
//   - a writer of the control file (shiftctl inject, RequestInject) stores the words and a
//     request sequence, and the file's watcher closes them before it answers (control.go),
//     so the WR posted after the command returns is counted; a writer that stores only the
//     words is served at the watcher's next poll;
//   - a QP created while an injection is armed for it starts with the gate closed.
//
// A gate kept closed this way is marked (injClosed). Every opening of a send gate for Default
// posts (reopenLocked, closedGates.reopen, inboxOpenLocked) goes through openSendLocked,
// which keeps it closed while the injection is armed for the QP; once the countdown is spent
// or disarmed, the QP's next locked post opens it (injReopenLocked). The gate's backup mode
// is left alone: a post on the backup is never injected.

// injArmedFor reports whether the injection words arm a fault that may fall on q's sends.
func (q *QP) injArmedFor() bool {
	if q.c.injArmed.Load() == 0 {
		return false
	}
	t := q.c.injQPN.Load()
	return t == 0 || t == q.qpn
}

// openSendLocked opens q's closed send gate for Default posts, unless an injection is armed
// for q: the gate then stays closed until the injection is spent (q.mu held).
func (q *QP) openSendLocked() {
	if q.injArmedFor() {
		q.injClosed = true
		return
	}
	q.injClosed = false
	q.sendGate.reopen()
}

// injReopenLocked opens the send gate an armed injection kept closed, once the injection is
// spent or disarmed and q is still on the fast path: after a locked post (q.mu held).
func (q *QP) injReopenLocked() {
	if !q.injClosed || q.injArmedFor() {
		return
	}
	q.injClosed = false
	if q.slow || q.destroyed || len(q.pending) > 0 || !q.gateMayOpen(&q.sendGate) {
		return // the next recovery or the inbox's drain opens it
	}
	q.sendGate.reopen()
}

// armInjection closes the open send gates of c's QPs that the armed injection may fall on,
// under one barrier: a post that enters any of them afterwards takes the locked path, which
// counts it. It takes each QP's plain mutex, not q.mu's Lock, so that a backup mode stays
// open: arming touches only a gate's open state and injClosed, which a backup poster never
// does.
func (c *Context) armInjection() {
	if c.injArmed.Load() == 0 {
		return
	}
	var qs []*QP
	if t := c.injQPN.Load(); t == 0 {
		qs = c.live.all()
	} else if q := c.live.lookup(t); q != nil {
		qs = []*QP{q}
	}
	barrier := false
	for _, q := range qs {
		q.mu.Mutex.Lock()
		if q.injArmedFor() {
			q.injClosed = true
			if q.sendGate.state.CompareAndSwap(gateOpen, gateClosed) {
				barrier = true
			}
		}
		q.mu.Mutex.Unlock()
	}
	if barrier && asymGates {
		asymfence.Fence() // the closes, before any post the caller orders after this call
	}
}
