package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// The application's own ibv_modify_qp to ERR (librdmacm's rdma_disconnect does it, as do
// applications that flush a QP before they destroy it). Without SHIFT the QP stops: every WR
// outstanding completes with WR_FLUSH_ERR and later posts fail. SHIFT took the default QP in
// ERR for a failure of its NIC: the flushes were classified as the network's whenever a send
// was outstanding, and a post on a QP with nothing outstanding fell back, so the WRs the
// application meant to cancel ran on a backup and the QP went on (found by reading the code,
// then reproduced: TestApplicationModifyErr). Now the application's ERR ends SHIFT's
// involvement with the QP as its own error does (appErrorLocked): the flushes of the default
// QP pass through as they are, the backup QP in use goes to ERR too so that what runs there
// flushes to the application as well, the sends SHIFT still held complete flushed, and later
// posts go to the default QP, as without SHIFT. The peer is not told: its QP finds ours
// gone, as it would without SHIFT (its own fallback is then refused by this side).
//
// A Modify to RESET of a QP the application had connected (to reuse it, or a disconnect
// without ERR first) ends SHIFT's involvement the same way: the backup QP stays connected to
// the old peer's (connectBackup leaves a backup QP in RTS as it is), and a fallback of the QP
// reconnected to another peer failed it, its SEND and the new peer's receive flushed
// (TestApplicationResetReconnect). The QP then runs as on the plain provider. RESET drops the
// default QP's WRs without completions; if a fallback had started, what the backup QP held
// still completes flushed (SHIFT does not reset it). A RESET before the QP was connected
// (INIT back to RESET) changes nothing.
//
// appStopping is set before the default QP is moved, so a flush classified before the engine
// ran appStopLocked is the application's (flushCause) and never starts a fallback.

// stopsByApp reports whether the application's Modify to state to ends SHIFT's involvement:
// ERR, or RESET once the application had connected the QP (RTR or later).
func (q *QP) stopsByApp(to verbs.QPState) bool {
	if to == verbs.QPStateErr {
		return true
	}
	return to == verbs.QPStateReset && verbs.QPState(q.appState.Load()) >= verbs.QPStateRTR
}

// stopByApp moves q's default QP to ERR (or RESET) for the application (Modify) and ends
// SHIFT's involvement, both on the engine; the caller waits.
func (q *QP) stopByApp(a *verbs.QPAttr, mask verbs.QPAttrMask) error {
	q.appStopping.Store(true)
	var err error
	// The default QP moves on the engine, under q.mu, in the same transition as the stop: a
	// round queued before, whose reply resets the default QP (resetDefaultLocked), ran
	// between the two when the Modify came first, and left the QP in INIT with the
	// application's ERR undone; a receive posted afterwards was taken there and never
	// completed (TestApplicationModifyErr, backup case, about one run in 30 under load).
	q.c.eng.wait(func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if err = q.def.Modify(a, mask); err != nil && !q.c.defDead.Load() {
			q.appStopping.Store(false)
			return
		}
		// A dead default device may refuse the command (EIO: mlx5 fakes success for the moves
		// to ERR and RESET, another driver may not), but its QP executes nothing any more:
		// the application, whose QP SHIFT kept running on a backup, stops it there.
		err = nil
		q.appState.Store(uint32(a.State))
		q.appStopLocked()
	})
	if err != nil {
		return fmt.Errorf("failover: modify_qp: %w", err)
	}
	return nil
}

// appStopLocked is the engine's part of stopByApp (q.mu held).
func (q *QP) appStopLocked() {
	if q.destroyed || q.appErr {
		return
	}
	err := fmt.Errorf("failover: QP %#x: stopped by the application (modify_qp to %v): %w", q.qpn, verbs.QPState(q.appState.Load()), verbs.ErrQPState)
	st, rs := q.mach.sendState(), q.mach.recvState()
	if st == SendFailed && rs == RecvFailed {
		return // SHIFT gave it up already
	}
	q.c.appStops.Add(1)
	if st == SendDefault {
		// The default QP's completions are the application's; a dead device writes none.
		q.appEndLocked(err)
		q.flushDeadLocked() // deadflush.go
		if rs != RecvDefault {
			q.giveUpSetLocked() // the receive side moved: its receives on the backup flush there
		}
		return
	}
	// A fallback started: what the backup QP in use holds flushes there, and the sends SHIFT
	// held back complete flushed here. The default QP's completions stay SHIFT's to account
	// (a probe's WR among them).
	q.appErr = true
	q.failOnLocked(verbs.WCWRFlushErr, err)
	q.takeWithheldLocked() // stopwithheld.go
}
