package provider

import "github.com/shift-rdma/shift/mlx5"

// The completion enums are mlx5's (one definition of enum ibv_wc_status, ibv_wc_opcode and
// ibv_wc_flags in the module); the provider re-exports them under its verbs names.

// WCStatus is enum ibv_wc_status (infiniband/verbs.h); String returns what
// ibv_wc_status_str returns.
type WCStatus = mlx5.WCStatus

// Completion statuses.
const (
	WCSuccess        = mlx5.WCSuccess        // IBV_WC_SUCCESS
	WCLocLenErr      = mlx5.WCLocLenErr      // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr     = mlx5.WCLocQPOpErr     // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr    = mlx5.WCLocEECOpErr    // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr     = mlx5.WCLocProtErr     // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr     = mlx5.WCWRFlushErr     // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr      = mlx5.WCMWBindErr      // IBV_WC_MW_BIND_ERR
	WCBadRespErr     = mlx5.WCBadRespErr     // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr   = mlx5.WCLocAccessErr   // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr   = mlx5.WCRemInvReqErr   // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr   = mlx5.WCRemAccessErr   // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr       = mlx5.WCRemOpErr       // IBV_WC_REM_OP_ERR
	WCRetryExcErr    = mlx5.WCRetryExcErr    // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr = mlx5.WCRNRRetryExcErr // IBV_WC_RNR_RETRY_EXC_ERR
	WCLocRDDViolErr  = mlx5.WCLocRDDViolErr  // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr = mlx5.WCRemInvRdReqErr // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr    = mlx5.WCRemAbortErr    // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr     = mlx5.WCInvEECNErr     // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr = mlx5.WCInvEECStateErr // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr       = mlx5.WCFatalErr       // IBV_WC_FATAL_ERR
	WCRespTimeoutErr = mlx5.WCRespTimeoutErr // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr     = mlx5.WCGeneralErr     // IBV_WC_GENERAL_ERR
)

// WCOpcode is enum ibv_wc_opcode.
type WCOpcode = mlx5.WCOpcode

// Completion opcodes. Receive completions have WCRecv set, as in libibverbs.
const (
	WCSend            = mlx5.WCSend            // IBV_WC_SEND
	WCRDMAWrite       = mlx5.WCRDMAWrite       // IBV_WC_RDMA_WRITE
	WCRDMARead        = mlx5.WCRDMARead        // IBV_WC_RDMA_READ
	WCCompSwap        = mlx5.WCCompSwap        // IBV_WC_COMP_SWAP
	WCFetchAdd        = mlx5.WCFetchAdd        // IBV_WC_FETCH_ADD
	WCRecv            = mlx5.WCRecv            // IBV_WC_RECV
	WCRecvRDMAWithImm = mlx5.WCRecvRDMAWithImm // IBV_WC_RECV_RDMA_WITH_IMM
)

// WCFlags are enum ibv_wc_flags.
type WCFlags = mlx5.WCFlags

// Completion flags.
const (
	WCWithGRH = mlx5.WCFlagGRH     // IBV_WC_GRH
	WCWithImm = mlx5.WCFlagWithImm // IBV_WC_WITH_IMM
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
