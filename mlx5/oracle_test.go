package mlx5

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shift-rdma/shift/mlx5/internal/dvoracle"
)

// The oracle tests compare this package with C compiled against <infiniband/mlx5dv.h>
// (NVIDIA's encoders and PRM structs) and <rdma/mlx5-abi.h> (the kernel's driver data).

func needDV(t *testing.T) {
	t.Helper()
	if !dvoracle.DVAvailable() {
		t.Skip("mlx5dv.h oracle not built: needs cgo and libibverbs-dev (infiniband/mlx5dv.h)")
	}
}

func needABI(t *testing.T) {
	t.Helper()
	if !dvoracle.ABIAvailable() {
		t.Skip("mlx5-abi.h oracle not built: needs cgo and linux-libc-dev (rdma/mlx5-abi.h)")
	}
}

// seeded returns a generator and logs its seed so a failure can be replayed.
func seeded(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

const oracleRounds = 3000

func TestOracleConstants(t *testing.T) {
	needDV(t)
	needABI(t)
	goVals := map[string]int64{
		"MLX5_OPCODE_NOP": int64(OpcodeNOP), "MLX5_OPCODE_SEND_INVAL": int64(OpcodeSendInval),
		"MLX5_OPCODE_RDMA_WRITE": int64(OpcodeRDMAWrite), "MLX5_OPCODE_RDMA_WRITE_IMM": int64(OpcodeRDMAWriteImm),
		"MLX5_OPCODE_SEND": int64(OpcodeSend), "MLX5_OPCODE_SEND_IMM": int64(OpcodeSendImm),
		"MLX5_OPCODE_RDMA_READ": int64(OpcodeRDMARead), "MLX5_OPCODE_ATOMIC_CS": int64(OpcodeAtomicCS),
		"MLX5_OPCODE_ATOMIC_FA":   int64(OpcodeAtomicFA),
		"MLX5_WQE_CTRL_CQ_UPDATE": int64(CtrlCQUpdate), "MLX5_WQE_CTRL_SOLICITED": int64(CtrlSolicited),
		"MLX5_WQE_CTRL_FENCE": int64(CtrlFence), "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE": int64(CtrlInitiatorSmallFence),
		"MLX5_SEND_WQE_BB": SendWQEBB, "MLX5_SEND_WQE_SHIFT": SendWQEShift, "MLX5_INLINE_SEG": InlineSeg,
		"MLX5_INVALID_LKEY":   InvalidLKey,
		"MLX5_CQE_OWNER_MASK": int64(CQEOwnerMask), "MLX5_CQE_REQ": int64(CQEReq),
		"MLX5_CQE_RESP_WR_IMM": int64(CQERespWrImm), "MLX5_CQE_RESP_SEND": int64(CQERespSend),
		"MLX5_CQE_RESP_SEND_IMM": int64(CQERespSendImm), "MLX5_CQE_RESP_SEND_INV": int64(CQERespSendInv),
		"MLX5_CQE_RESIZE_CQ": int64(CQEResizeCQ), "MLX5_CQE_NO_PACKET": int64(CQENoPacket),
		"MLX5_CQE_SIG_ERR": int64(CQESigErr), "MLX5_CQE_REQ_ERR": int64(CQEReqErr),
		"MLX5_CQE_RESP_ERR": int64(CQERespErr), "MLX5_CQE_INVALID": int64(CQEInvalid),
		"MLX5_INLINE_SCATTER_32": int64(CQEInlineScatter32), "MLX5_INLINE_SCATTER_64": int64(CQEInlineScatter64),
		"MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR":        int64(SyndromeLocalLengthErr),
		"MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR":         int64(SyndromeLocalQPOpErr),
		"MLX5_CQE_SYNDROME_LOCAL_PROT_ERR":          int64(SyndromeLocalProtErr),
		"MLX5_CQE_SYNDROME_WR_FLUSH_ERR":            int64(SyndromeWRFlushErr),
		"MLX5_CQE_SYNDROME_MW_BIND_ERR":             int64(SyndromeMWBindErr),
		"MLX5_CQE_SYNDROME_BAD_RESP_ERR":            int64(SyndromeBadRespErr),
		"MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR":        int64(SyndromeLocalAccessErr),
		"MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR":    int64(SyndromeRemoteInvalReqErr),
		"MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR":       int64(SyndromeRemoteAccessErr),
		"MLX5_CQE_SYNDROME_REMOTE_OP_ERR":           int64(SyndromeRemoteOpErr),
		"MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR": int64(SyndromeTransportRetryExc),
		"MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR":       int64(SyndromeRNRRetryExc),
		"MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR":      int64(SyndromeRemoteAbortedErr),
		"MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT":       int64(VendorSyndromeODPPageFault),
		"MLX5_CQ_DOORBELL":                          CQDoorbell, "MLX5_CQ_DB_REQ_NOT_SOL": CQDBReqNotSol, "MLX5_CQ_DB_REQ_NOT": CQDBReqNot,
		"MLX5_RCV_DBR": RcvDBR, "MLX5_SND_DBR": SndDBR,
		"MLX5_MMAP_GET_REGULAR_PAGES_CMD": MmapRegularPage, "MLX5_MMAP_GET_NC_PAGES_CMD": MmapNCPage,
		"IBV_WC_SUCCESS": int64(WCSuccess), "IBV_WC_LOC_LEN_ERR": int64(WCLocLenErr),
		"IBV_WC_LOC_QP_OP_ERR": int64(WCLocQPOpErr), "IBV_WC_LOC_EEC_OP_ERR": int64(WCLocEECOpErr),
		"IBV_WC_LOC_PROT_ERR": int64(WCLocProtErr), "IBV_WC_WR_FLUSH_ERR": int64(WCWRFlushErr),
		"IBV_WC_MW_BIND_ERR": int64(WCMWBindErr), "IBV_WC_BAD_RESP_ERR": int64(WCBadRespErr),
		"IBV_WC_LOC_ACCESS_ERR": int64(WCLocAccessErr), "IBV_WC_REM_INV_REQ_ERR": int64(WCRemInvReqErr),
		"IBV_WC_REM_ACCESS_ERR": int64(WCRemAccessErr), "IBV_WC_REM_OP_ERR": int64(WCRemOpErr),
		"IBV_WC_RETRY_EXC_ERR": int64(WCRetryExcErr), "IBV_WC_RNR_RETRY_EXC_ERR": int64(WCRNRRetryExcErr),
		"IBV_WC_LOC_RDD_VIOL_ERR": int64(WCLocRDDViolErr), "IBV_WC_REM_INV_RD_REQ_ERR": int64(WCRemInvRdReqErr),
		"IBV_WC_REM_ABORT_ERR": int64(WCRemAbortErr), "IBV_WC_INV_EECN_ERR": int64(WCInvEECNErr),
		"IBV_WC_INV_EEC_STATE_ERR": int64(WCInvEECStateErr), "IBV_WC_FATAL_ERR": int64(WCFatalErr),
		"IBV_WC_RESP_TIMEOUT_ERR": int64(WCRespTimeoutErr), "IBV_WC_GENERAL_ERR": int64(WCGeneralErr),
		"IBV_WC_SEND": int64(WCSend), "IBV_WC_RDMA_WRITE": int64(WCRDMAWrite), "IBV_WC_RDMA_READ": int64(WCRDMARead),
		"IBV_WC_COMP_SWAP": int64(WCCompSwap), "IBV_WC_FETCH_ADD": int64(WCFetchAdd), "IBV_WC_BIND_MW": int64(WCBindMW),
		"IBV_WC_LOCAL_INV": int64(WCLocalInv), "IBV_WC_RECV": int64(WCRecv),
		"IBV_WC_RECV_RDMA_WITH_IMM": int64(WCRecvRDMAWithImm),
		"IBV_WC_GRH":                int64(WCFlagGRH), "IBV_WC_WITH_IMM": int64(WCFlagWithImm), "IBV_WC_WITH_INV": int64(WCFlagWithInv),
		"MLX5_IB_UVERBS_ABI_VERSION": ABIVersion, "MLX5_LIB_CAP_4K_UAR": LibCap4KUAR, "MLX5_LIB_CAP_DYN_UAR": LibCapDynUAR,
		"MLX5_IB_ALLOC_UCTX_DEVX":                AllocUctxDEVX,
		"MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD":   CreateCQFlagCQE128BPad,
		"MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX": CreateCQFlagUARPageIndex,
		"MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS":   CreateCQFlagRealTimeTS,
		"MLX5_QP_FLAG_SIGNATURE":                 QPFlagSignature, "MLX5_QP_FLAG_SCATTER_CQE": QPFlagScatterCQE,
		"MLX5_QP_FLAG_BFREG_INDEX": QPFlagBfregIndex, "MLX5_QP_FLAG_UAR_PAGE_INDEX": QPFlagUARPageIndex,
		"MLX5_IB_MMAP_REGULAR_PAGE": MmapRegularPage, "MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES": MmapGetContiguousPages,
		"MLX5_IB_MMAP_WC_PAGE": MmapWCPage, "MLX5_IB_MMAP_NC_PAGE": MmapNCPage, "MLX5_IB_MMAP_CORE_CLOCK": MmapCoreClock,
		"MLX5_IB_MMAP_ALLOC_WC": MmapAllocWC, "MLX5_IB_MMAP_CLOCK_INFO": MmapClockInfo,
		"MLX5_IB_MMAP_DEVICE_MEM": MmapDeviceMem,
		"MLX5_IB_OBJECT_UAR":      ObjectUAR, "MLX5_IB_METHOD_UAR_OBJ_ALLOC": MethodUARObjAlloc,
		"MLX5_IB_METHOD_UAR_OBJ_DESTROY":         MethodUARObjDestroy,
		"MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE":      AttrUARObjAllocHandle,
		"MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE":        AttrUARObjAllocType,
		"MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET": AttrUARObjAllocMmapOffset,
		"MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH": AttrUARObjAllocMmapLength,
		"MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID":     AttrUARObjAllocPageID,
		"MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE":    AttrUARObjDestroyHandle,
		"MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF":         UARAllocTypeBF, "MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC": UARAllocTypeNC,
	}
	seen := map[string]bool{}
	for _, c := range dvoracle.Consts() {
		v, ok := goVals[c.Name]
		if !ok {
			t.Errorf("header constant %s has no Go counterpart in the test table", c.Name)
			continue
		}
		seen[c.Name] = true
		if v != c.Value {
			t.Errorf("%s: Go %#x, header %#x", c.Name, v, c.Value)
		}
	}
	for n := range goVals {
		if !seen[n] {
			t.Errorf("Go constant for %s not checked against the header", n)
		}
	}
}

// probe derives the offset and size a Go encoder gives one C field: it sets only the Go
// fields that make up that C field to all ones, encodes, and returns the span of non-zero
// bytes. Put must zero what it does not set (true for every encoder here).
func probe(n int, put func([]byte)) (off, size int) {
	b := make([]byte, n)
	put(b)
	first, last := -1, -1
	for i, x := range b {
		if x != 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return -1, 0
	}
	return first, last - first + 1
}

type fieldProbe struct {
	strct, name string
	n           int // encoded size in Go
	put         func([]byte)
}

func allFields() []fieldProbe {
	const ones64 = ^uint64(0)
	const ones32 = ^uint32(0)
	var ps []fieldProbe
	add := func(strct string, n int, name string, put func([]byte)) {
		ps = append(ps, fieldProbe{strct, name, n, put})
	}
	ctrl := func(name string, c CtrlSeg) { add("mlx5_wqe_ctrl_seg", CtrlSegSize, name, c.Put) }
	ctrl("opmod_idx_opcode", CtrlSeg{Opmod: 0xff, WQEIndex: 0xffff, Opcode: 0xff})
	ctrl("qpn_ds", CtrlSeg{QPN: 0xffffff, DS: 0xff})
	ctrl("signature", CtrlSeg{Signature: 0xff})
	ctrl("dci_stream_channel_id", CtrlSeg{DCIStreamChannelID: 0xffff})
	ctrl("fm_ce_se", CtrlSeg{FMCESE: 0xff})
	ctrl("imm", CtrlSeg{Imm: ones32})
	add("mlx5_wqe_raddr_seg", RaddrSegSize, "raddr", (&RaddrSeg{RemoteAddr: ones64}).Put)
	add("mlx5_wqe_raddr_seg", RaddrSegSize, "rkey", (&RaddrSeg{RKey: ones32}).Put)
	add("mlx5_wqe_atomic_seg", AtomicSegSize, "swap_add", (&AtomicSeg{SwapAdd: ones64}).Put)
	add("mlx5_wqe_atomic_seg", AtomicSegSize, "compare", (&AtomicSeg{Compare: ones64}).Put)
	add("mlx5_wqe_data_seg", DataSegSize, "byte_count", (&DataSeg{ByteCount: ones32}).Put)
	add("mlx5_wqe_data_seg", DataSegSize, "lkey", (&DataSeg{LKey: ones32}).Put)
	add("mlx5_wqe_data_seg", DataSegSize, "addr", (&DataSeg{Addr: ones64}).Put)
	add("mlx5_wqe_inl_data_seg", InlineHdrSize, "byte_count", func(b []byte) { PutInlineHeader(b, 0x7fffffff) })
	cqe := func(name string, c CQE64) { add("mlx5_cqe64", CQE64Size, name, c.Put) }
	cqe("wqe_id", CQE64{WQEID: 0xffff})
	cqe("ml_path", CQE64{MLPath: 0xff})
	cqe("slid", CQE64{SLID: 0xffff})
	cqe("flags_rqpn", CQE64{FlagsRQPN: ones32})
	cqe("srqn_uidx", CQE64{SRQNUIdx: ones32})
	cqe("imm_inval_pkey", CQE64{ImmInvalPKey: ones32})
	cqe("byte_cnt", CQE64{ByteCnt: ones32})
	cqe("timestamp", CQE64{Timestamp: ones64})
	cqe("sop_drop_qpn", CQE64{SopDropQPN: ones32})
	cqe("wqe_counter", CQE64{WQECounter: 0xffff})
	cqe("signature", CQE64{Signature: 0xff})
	cqe("op_own", CQE64{OpOwn: 0xff})
	errOwn := CQEReqErr << 4 // an error opcode selects the mlx5_err_cqe view; op_own is its own field
	ecqe := func(name string, c CQE64) {
		add("mlx5_err_cqe", CQE64Size, name, func(b []byte) { c.Put(b); b[cqeOffOpOwn] = 0 })
	}
	ecqe("srqn", CQE64{OpOwn: errOwn, SRQNUIdx: ones32})
	ecqe("vendor_err_synd", CQE64{OpOwn: errOwn, VendorSyndrome: 0xff})
	ecqe("syndrome", CQE64{OpOwn: errOwn, Syndrome: 0xff})
	ecqe("s_wqe_opcode_qpn", CQE64{OpOwn: errOwn, SopDropQPN: ones32})
	ecqe("wqe_counter", CQE64{OpOwn: errOwn, WQECounter: 0xffff})
	ecqe("signature", CQE64{OpOwn: errOwn, Signature: 0xff})
	add("mlx5_err_cqe", CQE64Size, "op_own", (&CQE64{OpOwn: 0xff}).Put)

	req := func(name string, r AllocUcontextReqV2) {
		add("mlx5_ib_alloc_ucontext_req_v2", AllocUcontextReqV2Size, name, r.Put)
	}
	req("total_num_bfregs", AllocUcontextReqV2{TotalNumBfregs: ones32})
	req("num_low_latency_bfregs", AllocUcontextReqV2{NumLowLatencyBfregs: ones32})
	req("flags", AllocUcontextReqV2{Flags: ones32})
	req("comp_mask", AllocUcontextReqV2{CompMask: ones32})
	req("max_cqe_version", AllocUcontextReqV2{MaxCQEVersion: 0xff})
	req("lib_caps", AllocUcontextReqV2{LibCaps: ones64})
	resp := func(name string, r AllocUcontextResp) {
		add("mlx5_ib_alloc_ucontext_resp", AllocUcontextRespSize, name, r.Put)
	}
	resp("qp_tab_size", AllocUcontextResp{QPTabSize: ones32})
	resp("bf_reg_size", AllocUcontextResp{BfRegSize: ones32})
	resp("tot_bfregs", AllocUcontextResp{TotBfregs: ones32})
	resp("cache_line_size", AllocUcontextResp{CacheLineSize: ones32})
	resp("max_sq_desc_sz", AllocUcontextResp{MaxSQDescSz: 0xffff})
	resp("max_rq_desc_sz", AllocUcontextResp{MaxRQDescSz: 0xffff})
	resp("max_send_wqebb", AllocUcontextResp{MaxSendWQEBB: ones32})
	resp("max_recv_wr", AllocUcontextResp{MaxRecvWR: ones32})
	resp("max_srq_recv_wr", AllocUcontextResp{MaxSRQRecvWR: ones32})
	resp("num_ports", AllocUcontextResp{NumPorts: 0xffff})
	resp("flow_action_flags", AllocUcontextResp{FlowActionFlags: 0xffff})
	resp("comp_mask", AllocUcontextResp{CompMask: ones32})
	resp("response_length", AllocUcontextResp{ResponseLength: ones32})
	resp("cqe_version", AllocUcontextResp{CQEVersion: 0xff})
	resp("cmds_supp_uhw", AllocUcontextResp{CmdsSuppUHW: 0xff})
	resp("eth_min_inline", AllocUcontextResp{EthMinInline: 0xff})
	resp("clock_info_versions", AllocUcontextResp{ClockInfoVersions: 0xff})
	resp("hca_core_clock_offset", AllocUcontextResp{HCACoreClockOffset: ones64})
	resp("log_uar_size", AllocUcontextResp{LogUARSize: ones32})
	resp("num_uars_per_page", AllocUcontextResp{NumUARsPerPage: ones32})
	resp("num_dyn_bfregs", AllocUcontextResp{NumDynBfregs: ones32})
	resp("dump_fill_mkey", AllocUcontextResp{DumpFillMkey: ones32})
	cq := func(name string, c CreateCQ) { add("mlx5_ib_create_cq", CreateCQSize, name, c.Put) }
	cq("buf_addr", CreateCQ{BufAddr: ones64})
	cq("db_addr", CreateCQ{DBAddr: ones64})
	cq("cqe_size", CreateCQ{CQESize: ones32})
	cq("cqe_comp_en", CreateCQ{CQECompEn: 0xff})
	cq("cqe_comp_res_format", CreateCQ{CQECompResFormat: 0xff})
	cq("flags", CreateCQ{Flags: 0xffff})
	cq("uar_page_index", CreateCQ{UARPageIndex: 0xffff})
	add("mlx5_ib_create_cq_resp", CreateCQRespSize, "cqn", (&CreateCQResp{CQN: ones32}).Put)
	qp := func(name string, q CreateQP) { add("mlx5_ib_create_qp", CreateQPSize, name, q.Put) }
	qp("buf_addr", CreateQP{BufAddr: ones64})
	qp("db_addr", CreateQP{DBAddr: ones64})
	qp("sq_wqe_count", CreateQP{SQWQECount: ones32})
	qp("rq_wqe_count", CreateQP{RQWQECount: ones32})
	qp("rq_wqe_shift", CreateQP{RQWQEShift: ones32})
	qp("flags", CreateQP{Flags: ones32})
	qp("uidx", CreateQP{UIdx: ones32})
	qp("bfreg_index", CreateQP{BfregIndex: ones32})
	qp("sq_buf_addr", CreateQP{SQBufAddr: ones64})
	qp("ece_options", CreateQP{ECEOptions: ones32})
	qp("dci_streams", CreateQP{DCIStreams: [2]uint8{0xff, 0xff}})
	qr := func(name string, r CreateQPResp) { add("mlx5_ib_create_qp_resp", CreateQPRespSize, name, r.Put) }
	qr("bfreg_index", CreateQPResp{BfregIndex: ones32})
	qr("ece_options", CreateQPResp{ECEOptions: ones32})
	qr("comp_mask", CreateQPResp{CompMask: ones32})
	qr("tirn", CreateQPResp{TIRN: ones32})
	qr("tisn", CreateQPResp{TISN: ones32})
	qr("rqn", CreateQPResp{RQN: ones32})
	qr("sqn", CreateQPResp{SQN: ones32})
	qr("tir_icm_addr", CreateQPResp{TIRICMAddr: ones64})
	return ps
}

// TestOracleLayout checks sizeof and offsetof/sizeof of every field of every PRM and
// mlx5-abi.h struct this package encodes: the Go side is measured by probing the encoders.
func TestOracleLayout(t *testing.T) {
	needDV(t)
	needABI(t)
	cf := map[string]dvoracle.Field{}
	for _, f := range dvoracle.Fields() {
		cf[f.Struct+"."+f.Name] = f
	}
	checked := map[string]bool{}
	for _, p := range allFields() {
		key := p.strct + "." + p.name
		c, ok := cf[key]
		if !ok {
			t.Errorf("%s: not in the C oracle", key)
			continue
		}
		checked[key] = true
		off, size := probe(p.n, p.put)
		if off != c.Off || size != c.Size {
			t.Errorf("%s: Go encodes at offset %d size %d, C has offset %d size %d", key, off, size, c.Off, c.Size)
		}
		s := cf[p.strct+"."]
		if s.Size != p.n {
			t.Errorf("sizeof(struct %s) = %d, Go encodes %d bytes", p.strct, s.Size, p.n)
		}
	}
	for k, f := range cf {
		if f.Name != "" && f.Name != "reserved" && !checked[k] {
			t.Errorf("C field %s not probed in Go", k)
		}
	}
	// Minimum lengths the decoders accept are offsets in the C structs.
	mins := []struct {
		name string
		got  int
		want string
	}{
		{"AllocUcontextReqMinSize", AllocUcontextReqMinSize, "mlx5_ib_alloc_ucontext_req."},
		{"AllocUcontextRespMinSize", AllocUcontextRespMinSize, "mlx5_ib_alloc_ucontext_resp.cqe_version"},
		{"CreateCQMinSize", CreateCQMinSize, "mlx5_ib_create_cq.flags"},
		{"AllocUcontextReqMinV2Size", AllocUcontextReqMinV2Size, "mlx5_ib_alloc_ucontext_req_v2.max_cqe_version"},
		{"CreateQPMinSize", CreateQPMinSize, "mlx5_ib_create_qp.ece_options"},
		{"createQPReservedOff", createQPReservedOff, "mlx5_ib_create_qp.reserved"},
		{"CreateQPRespMinSize", CreateQPRespMinSize, "mlx5_ib_create_qp_resp.ece_options"},
	}
	for _, m := range mins {
		f := cf[m.want]
		want := f.Off
		if f.Name == "" {
			want = f.Size
		}
		if m.got != want {
			t.Errorf("%s = %d, C %s gives %d", m.name, m.got, m.want, want)
		}
	}
}

func TestOracleCtrlSeg(t *testing.T) {
	needDV(t)
	r := seeded(t)
	for i := 0; i < oracleRounds; i++ {
		c := CtrlSeg{
			Opmod: uint8(r.Uint32()), WQEIndex: uint16(r.Uint32()), Opcode: Opcode(r.Uint32()),
			QPN: r.Uint32() & 0xffffff, DS: uint8(r.Uint32()), Signature: uint8(r.Uint32()),
			FMCESE: uint8(r.Uint32()), Imm: r.Uint32(),
		}
		want := dvoracle.CtrlSeg(c.WQEIndex, uint8(c.Opcode), c.Opmod, c.QPN, c.FMCESE, c.DS, c.Signature, c.Imm)
		var got [16]byte
		c.Put(got[:])
		if got != want {
			t.Fatalf("round %d %+v:\n go %x\n dv %x", i, c, got, want)
		}
		d, err := DecodeCtrlSeg(want[:])
		if err != nil || d != c {
			t.Fatalf("round %d: decode(dv) = %+v, %v; want %+v", i, d, err, c)
		}
	}
}

func TestOracleDataRaddrAtomicInline(t *testing.T) {
	needDV(t)
	r := seeded(t)
	for i := 0; i < oracleRounds; i++ {
		var got [16]byte
		d := DataSeg{ByteCount: r.Uint32(), LKey: r.Uint32(), Addr: r.Uint64()}
		d.Put(got[:])
		if want := dvoracle.DataSeg(d.ByteCount, d.LKey, d.Addr); got != want {
			t.Fatalf("data %+v:\n go %x\n dv %x", d, got, want)
		}
		if dd, _ := DecodeDataSeg(got[:]); dd != d {
			t.Fatalf("data decode %+v != %+v", dd, d)
		}
		ra := RaddrSeg{RemoteAddr: r.Uint64(), RKey: r.Uint32()}
		for j := range got {
			got[j] = 0xa5 // the reserved word must be overwritten with zero
		}
		ra.Put(got[:])
		if want := dvoracle.RaddrSeg(ra.RemoteAddr, ra.RKey); got != want {
			t.Fatalf("raddr %+v:\n go %x\n dv %x", ra, got, want)
		}
		if rr, _ := DecodeRaddrSeg(got[:]); rr != ra {
			t.Fatalf("raddr decode %+v != %+v", rr, ra)
		}
		cs := CompareSwap(r.Uint64(), r.Uint64())
		cs.Put(got[:])
		if want := dvoracle.AtomicSeg(cs.SwapAdd, cs.Compare); got != want {
			t.Fatalf("atomic %+v:\n go %x\n dv %x", cs, got, want)
		}
		if aa, _ := DecodeAtomicSeg(got[:]); aa != cs {
			t.Fatalf("atomic decode %+v != %+v", aa, cs)
		}
		n := r.Uint32N(1 << 20)
		var h [4]byte
		PutInlineHeader(h[:], n)
		if want := dvoracle.InlineHdr(n); h != want {
			t.Fatalf("inline header %d: go %x dv %x", n, h, want)
		}
		if !IsInline(h[:]) || InlineLen(h[:]) != n {
			t.Fatalf("inline header %d decodes as inline=%v len=%d", n, IsInline(h[:]), InlineLen(h[:]))
		}
	}
}

func TestOracleCQE(t *testing.T) {
	needDV(t)
	r := seeded(t)
	for i := 0; i < oracleRounds; i++ {
		f := dvoracle.CQE{
			WQEID: uint16(r.Uint32()), MLPath: uint8(r.Uint32()), SLID: uint16(r.Uint32()),
			FlagsRQPN: r.Uint32(), SRQNUIdx: r.Uint32(), ImmInvalPKey: r.Uint32(), ByteCnt: r.Uint32(),
			Timestamp: r.Uint64(), SopDropQPN: r.Uint32(), WQECounter: uint16(r.Uint32()),
			Signature: uint8(r.Uint32()),
			// Any opcode but the two error ones, whose bytes 52..59 mean something else.
			OpOwn: []uint8{CQEReq, CQERespWrImm, CQERespSend, CQERespSendImm, CQERespSendInv, CQEInvalid}[r.IntN(6)]<<4 | uint8(r.UintN(16)),
		}
		b := dvoracle.CQE64(f)
		c, err := DecodeCQE64(b[:])
		if err != nil {
			t.Fatal(err)
		}
		want := CQE64{WQEID: f.WQEID, MLPath: f.MLPath, SLID: f.SLID, FlagsRQPN: f.FlagsRQPN, SRQNUIdx: f.SRQNUIdx,
			ImmInvalPKey: f.ImmInvalPKey, ByteCnt: f.ByteCnt, Timestamp: f.Timestamp, SopDropQPN: f.SopDropQPN,
			WQECounter: f.WQECounter, Signature: f.Signature, OpOwn: f.OpOwn}
		if c != want {
			t.Fatalf("round %d: decode(C cqe) =\n %+v\nwant\n %+v", i, c, want)
		}
		var back [64]byte
		c.Put(back[:])
		if back != b {
			t.Fatalf("round %d: Put differs from C:\n go %x\n  C %x", i, back, b)
		}
		owner, se, format, opcode := dvoracle.CQEGetters(b)
		if c.Owner() != owner || boolU8(c.SolicitedEvent()) != se || c.Format() != format || c.Opcode() != opcode {
			t.Fatalf("round %d: getters go (%d,%v,%d,%d) dv (%d,%d,%d,%d)", i, c.Owner(), c.SolicitedEvent(), c.Format(), c.Opcode(), owner, se, format, opcode)
		}
	}
}

func boolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func TestOracleErrCQE(t *testing.T) {
	needDV(t)
	r := seeded(t)
	for i := 0; i < oracleRounds; i++ {
		f := dvoracle.ErrCQE{
			SRQN: r.Uint32(), VendorErrSynd: uint8(r.Uint32()), Syndrome: uint8(r.Uint32()),
			SWQEOpcodeQPN: r.Uint32(), WQECounter: uint16(r.Uint32()), Signature: uint8(r.Uint32()),
			OpOwn: []uint8{CQEReqErr, CQERespErr}[r.IntN(2)]<<4 | uint8(r.UintN(16)),
		}
		b := dvoracle.ErrCQE64(f)
		c, err := DecodeCQE64(b[:])
		if err != nil {
			t.Fatal(err)
		}
		if !c.IsError() || c.SRQNUIdx != f.SRQN || c.VendorSyndrome != f.VendorErrSynd || c.Syndrome != f.Syndrome ||
			c.SopDropQPN != f.SWQEOpcodeQPN || c.WQECounter != f.WQECounter || c.Signature != f.Signature || c.OpOwn != f.OpOwn {
			t.Fatalf("round %d: decode(C err cqe) = %+v from %+v", i, c, f)
		}
		var back [64]byte
		c.Put(back[:])
		if back != b {
			t.Fatalf("round %d: Put differs from C:\n go %x\n  C %x", i, back, b)
		}
		wc := c.Completion()
		if wc.Status != StatusFromSyndrome(f.Syndrome) || wc.VendorErr != f.VendorErrSynd || wc.QPN != f.SWQEOpcodeQPN&0xffffff {
			t.Fatalf("round %d: completion %+v from %+v", i, wc, f)
		}
	}
}

func TestOracleDriverData(t *testing.T) {
	needABI(t)
	r := seeded(t)
	for i := 0; i < oracleRounds; i++ {
		req := AllocUcontextReqV2{TotalNumBfregs: r.Uint32(), NumLowLatencyBfregs: r.Uint32(), Flags: r.Uint32(),
			CompMask: r.Uint32(), MaxCQEVersion: uint8(r.Uint32()), LibCaps: r.Uint64()}
		check(t, "alloc_ucontext_req_v2", &req, req.Put, AllocUcontextReqV2Size,
			dvoracle.AllocUcontextReqV2(req.TotalNumBfregs, req.NumLowLatencyBfregs, req.Flags, req.CompMask, req.MaxCQEVersion, req.LibCaps),
			func(b []byte) (any, error) { v, err := DecodeAllocUcontextReq(b); return &v, err })

		var v [22]uint64
		for j := range v {
			v[j] = r.Uint64()
		}
		resp := AllocUcontextResp{QPTabSize: uint32(v[0]), BfRegSize: uint32(v[1]), TotBfregs: uint32(v[2]),
			CacheLineSize: uint32(v[3]), MaxSQDescSz: uint16(v[4]), MaxRQDescSz: uint16(v[5]), MaxSendWQEBB: uint32(v[6]),
			MaxRecvWR: uint32(v[7]), MaxSRQRecvWR: uint32(v[8]), NumPorts: uint16(v[9]), FlowActionFlags: uint16(v[10]),
			CompMask: uint32(v[11]), ResponseLength: uint32(v[12]), CQEVersion: uint8(v[13]), CmdsSuppUHW: uint8(v[14]),
			EthMinInline: uint8(v[15]), ClockInfoVersions: uint8(v[16]), HCACoreClockOffset: v[17], LogUARSize: uint32(v[18]),
			NumUARsPerPage: uint32(v[19]), NumDynBfregs: uint32(v[20]), DumpFillMkey: uint32(v[21])}
		check(t, "alloc_ucontext_resp", &resp, resp.Put, AllocUcontextRespSize, dvoracle.AllocUcontextResp(v),
			func(b []byte) (any, error) { v, err := DecodeAllocUcontextResp(b); return &v, err })

		cq := CreateCQ{BufAddr: r.Uint64(), DBAddr: r.Uint64(), CQESize: r.Uint32(), CQECompEn: uint8(r.Uint32()),
			CQECompResFormat: uint8(r.Uint32()), Flags: uint16(r.Uint32()), UARPageIndex: uint16(r.Uint32())}
		check(t, "create_cq", &cq, cq.Put, CreateCQSize,
			dvoracle.CreateCQ(cq.BufAddr, cq.DBAddr, cq.CQESize, cq.CQECompEn, cq.CQECompResFormat, cq.Flags, cq.UARPageIndex),
			func(b []byte) (any, error) { v, err := DecodeCreateCQ(b); return &v, err })

		cr := CreateCQResp{CQN: r.Uint32()}
		check(t, "create_cq_resp", &cr, cr.Put, CreateCQRespSize, dvoracle.CreateCQResp(cr.CQN),
			func(b []byte) (any, error) { v, err := DecodeCreateCQResp(b); return &v, err })

		qp := CreateQP{BufAddr: r.Uint64(), DBAddr: r.Uint64(), SQWQECount: r.Uint32(), RQWQECount: r.Uint32(),
			RQWQEShift: r.Uint32(), Flags: r.Uint32(), UIdx: r.Uint32(), BfregIndex: r.Uint32(), SQBufAddr: r.Uint64(),
			ECEOptions: r.Uint32(), DCIStreams: [2]uint8{uint8(r.Uint32()), uint8(r.Uint32())}}
		check(t, "create_qp", &qp, qp.Put, CreateQPSize,
			dvoracle.CreateQP(qp.BufAddr, qp.DBAddr, qp.SQWQECount, qp.RQWQECount, qp.RQWQEShift, qp.Flags, qp.UIdx,
				qp.BfregIndex, qp.SQBufAddr, qp.ECEOptions, qp.DCIStreams[0], qp.DCIStreams[1]),
			func(b []byte) (any, error) { v, err := DecodeCreateQP(b); return &v, err })

		qr := CreateQPResp{BfregIndex: r.Uint32(), ECEOptions: r.Uint32(), CompMask: r.Uint32(), TIRN: r.Uint32(),
			TISN: r.Uint32(), RQN: r.Uint32(), SQN: r.Uint32(), TIRICMAddr: r.Uint64()}
		check(t, "create_qp_resp", &qr, qr.Put, CreateQPRespSize,
			dvoracle.CreateQPResp(qr.BfregIndex, qr.ECEOptions, qr.CompMask, qr.TIRN, qr.TISN, qr.RQN, qr.SQN, qr.TIRICMAddr),
			func(b []byte) (any, error) { v, err := DecodeCreateQPResp(b); return &v, err })
		if t.Failed() {
			t.FailNow()
		}
	}
}

// check compares Go's encoding of v with the C bytes and decodes the C bytes back into v.
func check(t *testing.T, name string, v any, put func([]byte), n int, cBytes []byte, decode func([]byte) (any, error)) {
	t.Helper()
	got := make([]byte, n)
	put(got)
	if !bytes.Equal(got, cBytes) {
		t.Errorf("%s: Go encoding differs from C:\n go %x\n  C %x", name, got, cBytes)
		return
	}
	d, err := decode(cBytes)
	if err != nil || fmt.Sprint(d) != fmt.Sprint(v) {
		t.Errorf("%s: decode(C) = %+v, %v; want %+v", name, d, err, v)
	}
}
