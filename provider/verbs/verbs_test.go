package verbs_test

import (
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/provider/verbs/internal/verbsoracle"
)

// TestConstantsMatchVerbsH checks every mirrored enum value against libibverbs' verbs.h.
func TestConstantsMatchVerbsH(t *testing.T) {
	if !verbsoracle.Available() {
		t.Skip("verbs.h oracle not built: needs cgo and libibverbs-dev (<infiniband/verbs.h>)")
	}
	want := map[string]int64{
		"IBV_WR_RDMA_WRITE": int64(verbs.WRRDMAWrite), "IBV_WR_RDMA_WRITE_WITH_IMM": int64(verbs.WRRDMAWriteWithImm),
		"IBV_WR_SEND": int64(verbs.WRSend), "IBV_WR_SEND_WITH_IMM": int64(verbs.WRSendWithImm),
		"IBV_WR_RDMA_READ": int64(verbs.WRRDMARead), "IBV_WR_ATOMIC_CMP_AND_SWP": int64(verbs.WRAtomicCmpAndSwp),
		"IBV_WR_ATOMIC_FETCH_AND_ADD": int64(verbs.WRAtomicFetchAdd),
		"IBV_SEND_FENCE":              int64(verbs.SendFence), "IBV_SEND_SIGNALED": int64(verbs.SendSignaled),
		"IBV_SEND_SOLICITED": int64(verbs.SendSolicited), "IBV_SEND_INLINE": int64(verbs.SendInline),
		"IBV_WC_SUCCESS": int64(verbs.WCSuccess), "IBV_WC_LOC_LEN_ERR": int64(verbs.WCLocLenErr),
		"IBV_WC_LOC_QP_OP_ERR": int64(verbs.WCLocQPOpErr), "IBV_WC_LOC_EEC_OP_ERR": int64(verbs.WCLocEECOpErr),
		"IBV_WC_LOC_PROT_ERR": int64(verbs.WCLocProtErr), "IBV_WC_WR_FLUSH_ERR": int64(verbs.WCWRFlushErr),
		"IBV_WC_MW_BIND_ERR": int64(verbs.WCMWBindErr), "IBV_WC_BAD_RESP_ERR": int64(verbs.WCBadRespErr),
		"IBV_WC_LOC_ACCESS_ERR": int64(verbs.WCLocAccessErr), "IBV_WC_REM_INV_REQ_ERR": int64(verbs.WCRemInvReqErr),
		"IBV_WC_REM_ACCESS_ERR": int64(verbs.WCRemAccessErr), "IBV_WC_REM_OP_ERR": int64(verbs.WCRemOpErr),
		"IBV_WC_RETRY_EXC_ERR": int64(verbs.WCRetryExcErr), "IBV_WC_RNR_RETRY_EXC_ERR": int64(verbs.WCRNRRetryExcErr),
		"IBV_WC_LOC_RDD_VIOL_ERR": int64(verbs.WCLocRDDViolErr), "IBV_WC_REM_INV_RD_REQ_ERR": int64(verbs.WCRemInvRdReqErr),
		"IBV_WC_REM_ABORT_ERR": int64(verbs.WCRemAbortErr), "IBV_WC_INV_EECN_ERR": int64(verbs.WCInvEECNErr),
		"IBV_WC_INV_EEC_STATE_ERR": int64(verbs.WCInvEECStateErr), "IBV_WC_FATAL_ERR": int64(verbs.WCFatalErr),
		"IBV_WC_RESP_TIMEOUT_ERR": int64(verbs.WCRespTimeoutErr), "IBV_WC_GENERAL_ERR": int64(verbs.WCGeneralErr),
		"IBV_WC_SEND": int64(verbs.WCSend), "IBV_WC_RDMA_WRITE": int64(verbs.WCRDMAWrite),
		"IBV_WC_RDMA_READ": int64(verbs.WCRDMARead), "IBV_WC_COMP_SWAP": int64(verbs.WCCompSwap),
		"IBV_WC_FETCH_ADD": int64(verbs.WCFetchAdd), "IBV_WC_BIND_MW": int64(verbs.WCBindMW),
		"IBV_WC_LOCAL_INV": int64(verbs.WCLocalInv), "IBV_WC_RECV": int64(verbs.WCRecv),
		"IBV_WC_RECV_RDMA_WITH_IMM": int64(verbs.WCRecvRDMAWithImm),
		"IBV_WC_GRH":                int64(verbs.WCFlagGRH), "IBV_WC_WITH_IMM": int64(verbs.WCFlagWithImm),
		"IBV_WC_WITH_INV": int64(verbs.WCFlagWithInv),
		"IBV_QPS_RESET":   int64(verbs.QPStateReset), "IBV_QPS_INIT": int64(verbs.QPStateInit),
		"IBV_QPS_RTR": int64(verbs.QPStateRTR), "IBV_QPS_RTS": int64(verbs.QPStateRTS),
		"IBV_QPS_SQD": int64(verbs.QPStateSQD), "IBV_QPS_SQE": int64(verbs.QPStateSQE), "IBV_QPS_ERR": int64(verbs.QPStateErr),
		"IBV_QP_STATE": int64(verbs.QPAttrState), "IBV_QP_CUR_STATE": int64(verbs.QPAttrCurState),
		"IBV_QP_EN_SQD_ASYNC_NOTIFY": int64(verbs.QPAttrEnSQDAsyncNotify), "IBV_QP_ACCESS_FLAGS": int64(verbs.QPAttrAccessFlags),
		"IBV_QP_PKEY_INDEX": int64(verbs.QPAttrPkeyIndex), "IBV_QP_PORT": int64(verbs.QPAttrPort),
		"IBV_QP_QKEY": int64(verbs.QPAttrQkey), "IBV_QP_AV": int64(verbs.QPAttrAV),
		"IBV_QP_PATH_MTU": int64(verbs.QPAttrPathMTU), "IBV_QP_TIMEOUT": int64(verbs.QPAttrTimeout),
		"IBV_QP_RETRY_CNT": int64(verbs.QPAttrRetryCnt), "IBV_QP_RNR_RETRY": int64(verbs.QPAttrRNRRetry),
		"IBV_QP_RQ_PSN": int64(verbs.QPAttrRQPSN), "IBV_QP_MAX_QP_RD_ATOMIC": int64(verbs.QPAttrMaxQPRdAtomic),
		"IBV_QP_ALT_PATH": int64(verbs.QPAttrAltPath), "IBV_QP_MIN_RNR_TIMER": int64(verbs.QPAttrMinRNRTimer),
		"IBV_QP_SQ_PSN": int64(verbs.QPAttrSQPSN), "IBV_QP_MAX_DEST_RD_ATOMIC": int64(verbs.QPAttrMaxDestRdAtomic),
		"IBV_QP_PATH_MIG_STATE": int64(verbs.QPAttrPathMigState), "IBV_QP_CAP": int64(verbs.QPAttrCap),
		"IBV_QP_DEST_QPN": int64(verbs.QPAttrDestQPN), "IBV_QP_RATE_LIMIT": int64(verbs.QPAttrRateLimit),
		"IBV_MTU_256": int64(verbs.MTU256), "IBV_MTU_512": int64(verbs.MTU512), "IBV_MTU_1024": int64(verbs.MTU1024),
		"IBV_MTU_2048": int64(verbs.MTU2048), "IBV_MTU_4096": int64(verbs.MTU4096),
		"IBV_ACCESS_LOCAL_WRITE": int64(verbs.AccessLocalWrite), "IBV_ACCESS_REMOTE_WRITE": int64(verbs.AccessRemoteWrite),
		"IBV_ACCESS_REMOTE_READ": int64(verbs.AccessRemoteRead), "IBV_ACCESS_REMOTE_ATOMIC": int64(verbs.AccessRemoteAtomic),
		"IBV_ACCESS_MW_BIND": int64(verbs.AccessMWBind), "IBV_ACCESS_ZERO_BASED": int64(verbs.AccessZeroBased),
		"IBV_ACCESS_ON_DEMAND": int64(verbs.AccessOnDemand), "IBV_ACCESS_HUGETLB": int64(verbs.AccessHugeTLB),
		"IBV_ACCESS_RELAXED_ORDERING": int64(verbs.AccessRelaxedOrdering),
		"IBV_PORT_NOP":                int64(verbs.PortNop), "IBV_PORT_DOWN": int64(verbs.PortDown), "IBV_PORT_INIT": int64(verbs.PortInit),
		"IBV_PORT_ARMED": int64(verbs.PortArmed), "IBV_PORT_ACTIVE": int64(verbs.PortActive),
		"IBV_PORT_ACTIVE_DEFER":      int64(verbs.PortActiveDefer),
		"IBV_LINK_LAYER_UNSPECIFIED": int64(verbs.LinkLayerUnspecified), "IBV_LINK_LAYER_INFINIBAND": int64(verbs.LinkLayerInfiniBand),
		"IBV_LINK_LAYER_ETHERNET": int64(verbs.LinkLayerEthernet),
		"IBV_EVENT_CQ_ERR":        int64(verbs.EventCQErr), "IBV_EVENT_QP_FATAL": int64(verbs.EventQPFatal),
		"IBV_EVENT_QP_REQ_ERR": int64(verbs.EventQPReqErr), "IBV_EVENT_QP_ACCESS_ERR": int64(verbs.EventQPAccessErr),
		"IBV_EVENT_COMM_EST": int64(verbs.EventCommEst), "IBV_EVENT_SQ_DRAINED": int64(verbs.EventSQDrained),
		"IBV_EVENT_PATH_MIG": int64(verbs.EventPathMig), "IBV_EVENT_PATH_MIG_ERR": int64(verbs.EventPathMigErr),
		"IBV_EVENT_DEVICE_FATAL": int64(verbs.EventDeviceFatal), "IBV_EVENT_PORT_ACTIVE": int64(verbs.EventPortActive),
		"IBV_EVENT_PORT_ERR": int64(verbs.EventPortErr), "IBV_EVENT_LID_CHANGE": int64(verbs.EventLIDChange),
		"IBV_EVENT_PKEY_CHANGE": int64(verbs.EventPkeyChange), "IBV_EVENT_SM_CHANGE": int64(verbs.EventSMChange),
		"IBV_EVENT_SRQ_ERR": int64(verbs.EventSRQErr), "IBV_EVENT_SRQ_LIMIT_REACHED": int64(verbs.EventSRQLimitReached),
		"IBV_EVENT_QP_LAST_WQE_REACHED": int64(verbs.EventQPLastWQEReached), "IBV_EVENT_CLIENT_REREGISTER": int64(verbs.EventClientReregister),
		"IBV_EVENT_GID_CHANGE": int64(verbs.EventGIDChange), "IBV_EVENT_WQ_FATAL": int64(verbs.EventWQFatal),
	}
	got := verbsoracle.Constants()
	if len(got) != len(want) {
		t.Errorf("oracle has %d constants, the test %d", len(got), len(want))
	}
	for name, v := range want {
		c, ok := got[name]
		if !ok {
			t.Errorf("%s: not in the oracle", name)
			continue
		}
		if c != v {
			t.Errorf("%s = %d in verbs.h, %d in package verbs", name, c, v)
		}
	}
}
