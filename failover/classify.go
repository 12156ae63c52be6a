package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// errClass says what a failed completion of a default QP means for SHIFT (docs/FAILOVER.md,
// "Which failures fall back"): only a failure of the network or the device may be hidden
// by a retransmission on the backup NIC; an error the application caused would fail the
// same way there, so it reaches the application at once, as without SHIFT.
type errClass uint8

const (
	// classNetwork: the path or the device failed; fall back (paper §3.1, §4.3.2).
	classNetwork errClass = iota
	// classApp: the application's own error (a bad key, address, length or opcode, the
	// peer's refusal of the request): no fallback, no repost, reported as is.
	classApp
	// classFlush: WR_FLUSH_ERR says only that the QP is in ERR; its cause is the QP's
	// first error, or (when a flush is the first) the port's state (flushCause).
	classFlush
)

func (c errClass) String() string {
	switch c {
	case classNetwork:
		return "network"
	case classApp:
		return "application"
	default:
		return "flush"
	}
}

// statusClass classifies a completion status (enum ibv_wc_status). Statuses a ConnectX
// cannot report on an RC QP (the EE-context and RDD ones) are application errors: nothing
// about them says the path failed, and a repost would only repeat them.
func statusClass(s verbs.WCStatus) errClass {
	switch s {
	case verbs.WCRetryExcErr, // no ACK within timeout × retry_cnt: the path or the peer's NIC is gone
		verbs.WCRNRRetryExcErr, // the peer answered RNR until the count ran out: SHIFT cannot tell a gone receiver from a slow one here; the handshake does (a live peer's count decides)
		verbs.WCRespTimeoutErr, // no response to a READ or atomic
		verbs.WCFatalErr:       // the device failed
		return classNetwork
	case verbs.WCWRFlushErr:
		return classFlush
	}
	// LOC_LEN, LOC_QP_OP, LOC_PROT, MW_BIND, BAD_RESP, LOC_ACCESS, REM_INV_REQ, REM_ACCESS,
	// REM_OP, REM_INV_RD_REQ, REM_ABORT, GENERAL and the rest: the work request or the
	// peer's memory is wrong, or the device reports something it cannot name (GENERAL, as
	// NCCL treats it: fatal, never retried).
	return classApp
}

// flushCause classifies a flush that is a QP's first error: with no error of its own, a
// default QP goes to ERR when its responder refused a request (the peer's bad key, address
// or opcode: the device raises QP_ACCESS_ERR or QP_REQ_ERR on the async fd, which reaches
// the application unchanged), when the application moved it there, or when the device or
// port died. A link that fails under an RC QP leaves it in RTS until a request times out
// (RETRY_EXC_ERR first). So a first flush with the port up is the application's, and one
// with the port down (or a device that no longer answers) is the network's.
//
// The flush may also be the first of the QP's completions the application polled while the
// real cause waits on the other CQ: a send of its own (or, after a recovery, one of SHIFT's
// probes or notifications) that failed with RETRY_EXC_ERR when the QP entered ERR, its
// receives flushed in the same moment. So a first flush is the application's only on a QP
// that never fell back and had no send WQE outstanding; otherwise it is taken for the
// network's, as before this classification (the fallback's handshake then decides) —
// unless the device raised QP_ACCESS_ERR or QP_REQ_ERR for the QP before the flush was
// classified: its responder refused the peer's request, which no other NIC would accept.
// The event and the completion travel apart (the async fd, the CQ), so a flush polled
// before SHIFT read the event is still taken for the network's.
func (q *QP) flushCause() errClass {
	if q.appStopping.Load() {
		return classApp // the application moved the QP to ERR (appstop.go)
	}
	if q.tracked {
		return classNetwork
	}
	if q.respRefused.Load() {
		return classApp // the device said so on the async fd (async.go)
	}
	q.defOutstandingLocked()
	for _, w := range q.outSends {
		if !w.Completed {
			return classNetwork // a send in flight (those held after an error had theirs)
		}
	}
	a, err := q.c.def.QueryPort(q.attr.Defaults().Port)
	if err != nil || a.State != verbs.PortActive {
		return classNetwork
	}
	return classApp
}

// failureClassLocked classifies the failure a non-peer fallback of q was started for, from
// the first error completion of its default QP the classifier kept (errWCs). With none (a
// failed post, a link event) it is the network's, unless the drain finds one (prepareLocked
// asks again).
func (q *QP) failureClassLocked() (errClass, verbs.WC) {
	if q.defStopped {
		// SHIFT moved the default QP to ERR itself (a fallback under way or refused): the
		// completions behind that are its own doing, and the failure it acted on was not the
		// application's.
		return classNetwork, verbs.WC{}
	}
	return q.scanErrWCsLocked()
}

// scanErrWCsLocked classifies the error completions the classifier kept for q, in order.
func (q *QP) scanErrWCsLocked() (errClass, verbs.WC) {
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	for _, e := range q.errWCs {
		c := statusClass(e.wc.Status)
		if c == classFlush {
			continue // a flush behind an error of the QP's own: the error decides
		}
		if c == classApp && e.wc.Status == verbs.WCLocProtErr && q.injHit.Load() {
			return classNetwork, e.wc // SHIFT's own fault injection (a corrupted lkey)
		}
		return c, e.wc
	}
	if len(q.errWCs) > 0 {
		if q.shiftErrSeen {
			return classNetwork, q.errWCs[0].wc // flushes behind a failed WR of SHIFT's own
		}
		return classFlush, q.errWCs[0].wc
	}
	return classNetwork, verbs.WC{}
}

// appErrorLocked ends SHIFT's involvement with q after the application's own error: the
// error and the completions behind it reach the application in order, exactly as the
// provider reports them; the peer is not notified and its QP is left alone; the default QP
// stays as the device left it (ERR); later posts go to it, as without SHIFT.
func (q *QP) appErrorLocked(wc verbs.WC) {
	if q.appStopping.Load() {
		q.appStopLocked() // a flush of the application's own Modify to ERR (appstop.go)
		return
	}
	q.c.appErrors.Add(1)
	q.appEndLocked(fmt.Errorf("failover: QP %#x: %v (wr_id %#x) is the application's error: reported, not failed over", q.qpn, wc.Status, wc.WRID))
}

// appEndLocked ends SHIFT's involvement with q for the application's doing (its error, its
// Modify to ERR: appstop.go), err the QP's error from then on.
func (q *QP) appEndLocked(err error) {
	q.markSlowLocked()
	q.appErr = true
	q.failErr = err
	if q.mach.sendState() != SendFailed {
		_, _ = q.mach.sendEvent(EvFatal)
	}
	if q.mach.recvState() != RecvFailed {
		_, _ = q.mach.recvEvent(EvFatal)
	}
	q.passThroughLocked()
}

// passThroughLocked hands the kept error completions to the application and passes every
// later completion of the default QP through unchanged.
func (q *QP) passThroughLocked() {
	q.scq.mu.Lock()
	if q.rcq != q.scq {
		q.rcq.mu.Lock()
	}
	q.fifoMu.Lock()
	errs := q.errWCs
	q.errWCs = nil
	q.fifoMu.Unlock()
	for _, e := range errs {
		e.cq.buf = append(e.cq.buf, e.wc)
	}
	q.defMode = defPassThrough
	if q.rcq != q.scq {
		q.rcq.mu.Unlock()
	}
	q.scq.mu.Unlock()
	q.scq.raise()
	q.rcq.raise()
}
