package provider

import "github.com/shift-rdma/shift/provider/verbs"

// canSend: the SQ executes new WQEs only in RTS (SQD accepts posts but does not start them;
// this provider rejects posting outside RTS so a caller learns about a dead QP at once).
func canSend(s verbs.QPState) bool { return s == verbs.QPStateRTS }

// canRecv: receives may be posted from INIT on (IB spec 10.8.2; the RQ is not processed
// before RTR), but not in RESET or ERR.
func canRecv(s verbs.QPState) bool {
	return s == verbs.QPStateInit || s == verbs.QPStateRTR || s == verbs.QPStateRTS || s == verbs.QPStateSQD
}
