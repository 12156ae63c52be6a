package verbs

import "strconv"

// WCStatus is enum ibv_wc_status, the status a completion reports.
type WCStatus uint32

// Work completion statuses, in the order of enum ibv_wc_status.
const (
	WCSuccess        WCStatus = iota // IBV_WC_SUCCESS
	WCLocLenErr                      // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr                     // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr                    // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr                     // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr                     // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr                      // IBV_WC_MW_BIND_ERR
	WCBadRespErr                     // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr                   // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr                   // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr                   // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr                       // IBV_WC_REM_OP_ERR
	WCRetryExcErr                    // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr                 // IBV_WC_RNR_RETRY_EXC_ERR
	WCLocRDDViolErr                  // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRdReqErr                 // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr                    // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr                     // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr                 // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr                       // IBV_WC_FATAL_ERR
	WCRespTimeoutErr                 // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr                     // IBV_WC_GENERAL_ERR
)

var wcStatusNames = [...]string{
	"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
	"WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",
	"REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",
	"REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR",
	"RESP_TIMEOUT_ERR", "GENERAL_ERR",
}

// Strings as ibv_wc_status_str (libibverbs) returns them.
var wcStatusStr = [...]string{
	"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error", "Work Request Flushed Error",
	"memory management operation error", "bad response error", "local access error",
	"remote invalid request error", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
}

// String returns what ibv_wc_status_str returns for the status, the text verbs
// applications print; an unknown status gives WC_STATUS_ and its value.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusStr) {
		return wcStatusStr[s]
	}
	return "WC_STATUS_" + strconv.Itoa(int(s))
}

// Name returns the IBV_WC_ name without the prefix (WR_FLUSH_ERR); an unknown status gives
// WC_STATUS_ and its value.
func (s WCStatus) Name() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "WC_STATUS_" + strconv.Itoa(int(s))
}

// WCOpcode is enum ibv_wc_opcode.
type WCOpcode uint32

// Work completion opcodes used by RC. Receive completions have WCRecv set, as in libibverbs.
const (
	WCSend            WCOpcode = 0          // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1          // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2          // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3          // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4          // IBV_WC_FETCH_ADD
	WCBindMW          WCOpcode = 5          // IBV_WC_BIND_MW
	WCLocalInv        WCOpcode = 6          // IBV_WC_LOCAL_INV
	WCRecv            WCOpcode = 1 << 7     // IBV_WC_RECV
	WCRecvRDMAWithImm WCOpcode = WCRecv + 1 // IBV_WC_RECV_RDMA_WITH_IMM
)

// String returns the IBV_WC_ name without the prefix.
func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "WC_OPCODE_" + strconv.Itoa(int(o))
}

// WCFlags is enum ibv_wc_flags.
type WCFlags uint32

// Work completion flags.
const (
	WCFlagGRH     WCFlags = 1 << 0 // IBV_WC_GRH
	WCFlagWithImm WCFlags = 1 << 1 // IBV_WC_WITH_IMM
	WCFlagWithInv WCFlags = 1 << 3 // IBV_WC_WITH_INV
)

// WC is struct ibv_wc as an mlx5 provider fills it for RC QPs. On an error completion only
// WRID, Status, VendorErr and QPNum are meaningful (libibverbs leaves the rest undefined;
// the implementations here zero them).
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	Imm       uint32 // host order (see SendWR.Imm)
	QPNum     uint32
	SrcQP     uint32
	Flags     WCFlags
	SL        uint8
}
