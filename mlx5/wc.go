package mlx5

import "github.com/shift-rdma/shift/provider/verbs"

// The completion enums are defined once, in package verbs (enum ibv_wc_status,
// ibv_wc_opcode and ibv_wc_flags); mlx5 maps CQE syndromes and opcodes onto them.

// WCStatus is verbs.WCStatus.
type WCStatus = verbs.WCStatus

// Work completion statuses (verbs.WC*).
const (
	WCSuccess        = verbs.WCSuccess
	WCLocLenErr      = verbs.WCLocLenErr
	WCLocQPOpErr     = verbs.WCLocQPOpErr
	WCLocEECOpErr    = verbs.WCLocEECOpErr
	WCLocProtErr     = verbs.WCLocProtErr
	WCWRFlushErr     = verbs.WCWRFlushErr
	WCMWBindErr      = verbs.WCMWBindErr
	WCBadRespErr     = verbs.WCBadRespErr
	WCLocAccessErr   = verbs.WCLocAccessErr
	WCRemInvReqErr   = verbs.WCRemInvReqErr
	WCRemAccessErr   = verbs.WCRemAccessErr
	WCRemOpErr       = verbs.WCRemOpErr
	WCRetryExcErr    = verbs.WCRetryExcErr
	WCRNRRetryExcErr = verbs.WCRNRRetryExcErr
	WCLocRDDViolErr  = verbs.WCLocRDDViolErr
	WCRemInvRdReqErr = verbs.WCRemInvRdReqErr
	WCRemAbortErr    = verbs.WCRemAbortErr
	WCInvEECNErr     = verbs.WCInvEECNErr
	WCInvEECStateErr = verbs.WCInvEECStateErr
	WCFatalErr       = verbs.WCFatalErr
	WCRespTimeoutErr = verbs.WCRespTimeoutErr
	WCGeneralErr     = verbs.WCGeneralErr
)

// StatusFromSyndrome maps an error CQE syndrome to a work completion status exactly as
// rdma-core's providers/mlx5/cq.c mlx5_handle_error_cqe does; unknown syndromes become
// IBV_WC_GENERAL_ERR.
func StatusFromSyndrome(syndrome uint8) WCStatus {
	switch syndrome {
	case SyndromeLocalLengthErr:
		return WCLocLenErr
	case SyndromeLocalQPOpErr:
		return WCLocQPOpErr
	case SyndromeLocalProtErr:
		return WCLocProtErr
	case SyndromeWRFlushErr:
		return WCWRFlushErr
	case SyndromeMWBindErr:
		return WCMWBindErr
	case SyndromeBadRespErr:
		return WCBadRespErr
	case SyndromeLocalAccessErr:
		return WCLocAccessErr
	case SyndromeRemoteInvalReqErr:
		return WCRemInvReqErr
	case SyndromeRemoteAccessErr:
		return WCRemAccessErr
	case SyndromeRemoteOpErr:
		return WCRemOpErr
	case SyndromeTransportRetryExc:
		return WCRetryExcErr
	case SyndromeRNRRetryExc:
		return WCRNRRetryExcErr
	case SyndromeRemoteAbortedErr:
		return WCRemAbortErr
	}
	return WCGeneralErr
}

// SyndromeForStatus is the inverse a device model needs: the syndrome an mlx5 NIC reports for
// a status. Statuses mlx5 never produces return ok=false.
func SyndromeForStatus(s WCStatus) (syndrome uint8, ok bool) {
	switch s {
	case WCLocLenErr:
		return SyndromeLocalLengthErr, true
	case WCLocQPOpErr:
		return SyndromeLocalQPOpErr, true
	case WCLocProtErr:
		return SyndromeLocalProtErr, true
	case WCWRFlushErr:
		return SyndromeWRFlushErr, true
	case WCMWBindErr:
		return SyndromeMWBindErr, true
	case WCBadRespErr:
		return SyndromeBadRespErr, true
	case WCLocAccessErr:
		return SyndromeLocalAccessErr, true
	case WCRemInvReqErr:
		return SyndromeRemoteInvalReqErr, true
	case WCRemAccessErr:
		return SyndromeRemoteAccessErr, true
	case WCRemOpErr:
		return SyndromeRemoteOpErr, true
	case WCRetryExcErr:
		return SyndromeTransportRetryExc, true
	case WCRNRRetryExcErr:
		return SyndromeRNRRetryExc, true
	case WCRemAbortErr:
		return SyndromeRemoteAbortedErr, true
	}
	return 0, false
}

// WCOpcode is verbs.WCOpcode.
type WCOpcode = verbs.WCOpcode

// Work completion opcodes used by RC (verbs.WC*).
const (
	WCSend            = verbs.WCSend
	WCRDMAWrite       = verbs.WCRDMAWrite
	WCRDMARead        = verbs.WCRDMARead
	WCCompSwap        = verbs.WCCompSwap
	WCFetchAdd        = verbs.WCFetchAdd
	WCBindMW          = verbs.WCBindMW
	WCLocalInv        = verbs.WCLocalInv
	WCRecv            = verbs.WCRecv
	WCRecvRDMAWithImm = verbs.WCRecvRDMAWithImm
)

// WCFlags is verbs.WCFlags.
type WCFlags = verbs.WCFlags

// Work completion flags (verbs.WCFlag*).
const (
	WCFlagGRH     = verbs.WCFlagGRH
	WCFlagWithImm = verbs.WCFlagWithImm
	WCFlagWithInv = verbs.WCFlagWithInv
)

// RequesterOpcode maps the send opcode of a requester CQE (top byte of sop_drop_qpn) to the
// work completion opcode and flags, as handle_good_req in providers/mlx5/cq.c does; lenFrom
// says where byte_len comes from. NOP and the other driver opcodes take their opcode from the provider's per-WQE table; they
// return ok=false here.
func RequesterOpcode(op Opcode) (opc WCOpcode, flags WCFlags, lenFrom ReqLen, ok bool) {
	switch op {
	case OpcodeRDMAWriteImm:
		return WCRDMAWrite, WCFlagWithImm, ReqLenNone, true
	case OpcodeRDMAWrite:
		return WCRDMAWrite, 0, ReqLenNone, true
	case OpcodeSendImm:
		return WCSend, WCFlagWithImm, ReqLenNone, true
	case OpcodeSend, OpcodeSendInval:
		return WCSend, 0, ReqLenNone, true
	case OpcodeRDMARead:
		return WCRDMARead, 0, ReqLenByteCnt, true
	case OpcodeAtomicCS:
		return WCCompSwap, 0, ReqLenAtomic, true
	case OpcodeAtomicFA:
		return WCFetchAdd, 0, ReqLenAtomic, true
	}
	return 0, 0, ReqLenNone, false
}

// ReqLen says where a requester completion's byte_len comes from.
type ReqLen uint8

// Sources of a requester completion's byte_len.
const (
	ReqLenNone    ReqLen = iota // not reported (left as the caller initialised it)
	ReqLenByteCnt               // the CQE's byte_cnt (RDMA READ)
	ReqLenAtomic                // 8 (atomics)
)

// ResponderOpcode maps the CQE opcode of a responder CQE to the work completion opcode and
// flags, as handle_responder in providers/mlx5/cq.c does.
func ResponderOpcode(cqeOpcode uint8) (opc WCOpcode, flags WCFlags, ok bool) {
	switch cqeOpcode {
	case CQERespWrImm:
		return WCRecvRDMAWithImm, WCFlagWithImm, true
	case CQERespSend:
		return WCRecv, 0, true
	case CQERespSendImm:
		return WCRecv, WCFlagWithImm, true
	case CQERespSendInv:
		return WCRecv, WCFlagWithInv, true
	}
	return 0, 0, false
}
