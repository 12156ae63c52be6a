package provider

// WCStatus is enum ibv_wc_status (infiniband/verbs.h), numbered identically.
type WCStatus uint32

// Completion statuses.
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
	WCRemInvRDReqErr                 // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr                    // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr                     // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr                 // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr                       // IBV_WC_FATAL_ERR
	WCRespTimeoutErr                 // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr                     // IBV_WC_GENERAL_ERR
)

// Strings as ibv_wc_status_str returns them.
var wcStatusStr = [...]string{
	"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error", "Work Request Flushed Error",
	"memory management operation error", "bad response error", "local access error",
	"remote invalid request error", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
}

// String returns what ibv_wc_status_str returns for the status.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusStr) {
		return wcStatusStr[s]
	}
	return "unknown"
}

// WCOpcode is enum ibv_wc_opcode.
type WCOpcode uint32

// Completion opcodes. Receive completions have WCRecv set, as in libibverbs.
const (
	WCSend            WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCRecv            WCOpcode = 128 // IBV_WC_RECV
	WCRecvRDMAWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
)

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
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "WC_OPCODE_UNKNOWN"
}

// WCFlags are enum ibv_wc_flags.
type WCFlags uint32

// Completion flags.
const (
	WCWithGRH WCFlags = 1 << 0 // IBV_WC_GRH
	WCWithImm WCFlags = 1 << 1 // IBV_WC_WITH_IMM
)

// WC is struct ibv_wc as libmlx5 fills it for RC QPs. On an error completion only WRID,
// Status, VendorErr and QPNum are meaningful (libibverbs leaves the rest undefined; this
// provider zeroes them).
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
