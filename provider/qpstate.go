package provider

// QPState is enum ibv_qp_state.
type QPState uint32

// QP states.
const (
	QPStateReset QPState = iota // IBV_QPS_RESET
	QPStateInit                 // IBV_QPS_INIT
	QPStateRTR                  // IBV_QPS_RTR
	QPStateRTS                  // IBV_QPS_RTS
	QPStateSQD                  // IBV_QPS_SQD
	QPStateSQE                  // IBV_QPS_SQE
	QPStateErr                  // IBV_QPS_ERR
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return "QPS_UNKNOWN"
}

// canSend: the SQ executes new WQEs only in RTS (SQD accepts posts but does not start them;
// this provider rejects posting outside RTS so a caller learns about a dead QP at once).
func (s QPState) canSend() bool { return s == QPStateRTS }

// canRecv: receives may be posted from INIT on (IB spec 10.8.2; the RQ is not processed
// before RTR), but not in RESET or ERR.
func (s QPState) canRecv() bool {
	return s == QPStateInit || s == QPStateRTR || s == QPStateRTS || s == QPStateSQD
}
