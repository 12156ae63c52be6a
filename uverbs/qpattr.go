package uverbs

// Path is an address vector (struct ibv_ah_attr as the kernel ABI carries it in
// struct ib_uverbs_qp_dest): the remote port and, for RoCE, the GRH.
type Path struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     bool // the GRH fields are valid (always for RoCE)
	Port         uint8
}

func (p Path) dest() QPDest {
	return QPDest{Dgid: p.DGID, Flow_label: p.FlowLabel, Dlid: p.DLID, Sgid_index: p.SGIDIndex,
		Hop_limit: p.HopLimit, Traffic_class: p.TrafficClass, Sl: p.SL, Src_path_bits: p.SrcPathBits,
		Static_rate: p.StaticRate, Is_global: boolU8(p.IsGlobal), Port_num: p.Port}
}

// PathFromDest converts the ABI form back.
func PathFromDest(d QPDest) Path {
	return Path{DGID: d.Dgid, FlowLabel: d.Flow_label, DLID: d.Dlid, SGIDIndex: d.Sgid_index,
		HopLimit: d.Hop_limit, TrafficClass: d.Traffic_class, SL: d.Sl, SrcPathBits: d.Src_path_bits,
		StaticRate: d.Static_rate, IsGlobal: d.Is_global != 0, Port: d.Port_num}
}

// QPAttr holds every QP attribute the verbs API lets an application modify or query (struct
// ibv_qp_attr). Which fields matter is decided by the QPAttr* mask passed alongside.
type QPAttr struct {
	State            uint8 // QPAttrState
	CurState         uint8 // QPAttrCurState
	EnSQDAsyncNotify bool  // QPAttrEnSQDAsyncNotify
	AccessFlags      uint32
	PkeyIndex        uint16
	Port             uint8
	Qkey             uint32
	AV               Path // QPAttrAV
	PathMTU          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	RQPSN            uint32
	MaxRdAtomic      uint8
	AltPath          Path // QPAttrAltPath, with AltPkeyIndex, AltPort, AltTimeout
	AltPkeyIndex     uint16
	AltPort          uint8
	AltTimeout       uint8
	MinRNRTimer      uint8
	SQPSN            uint32
	MaxDestRdAtomic  uint8
	PathMigState     uint8
	Cap              QPCap // QPAttrCap (query only on RC)
	DestQPN          uint32
	RateLimit        uint32 // QPAttrRateLimit (extended modify only)

	// Query-only fields.
	SQDraining bool
	SigAll     bool
}

// modifyCmd fills struct ib_uverbs_modify_qp with the fields mask selects (zero elsewhere),
// following rdma-core's copy_modify_qp_fields.
func (a *QPAttr) modifyCmd(handle, mask uint32) ModifyQPCmd {
	c := ModifyQPCmd{Qp_handle: handle, Attr_mask: mask}
	if mask&QPAttrState != 0 {
		c.Qp_state = a.State
	}
	if mask&QPAttrCurState != 0 {
		c.Cur_qp_state = a.CurState
	}
	if mask&QPAttrEnSQDAsyncNotify != 0 {
		c.En_sqd_async_notify = boolU8(a.EnSQDAsyncNotify)
	}
	if mask&QPAttrAccessFlags != 0 {
		c.Qp_access_flags = a.AccessFlags
	}
	if mask&QPAttrPkeyIndex != 0 {
		c.Pkey_index = a.PkeyIndex
	}
	if mask&QPAttrPort != 0 {
		c.Port_num = a.Port
	}
	if mask&QPAttrQkey != 0 {
		c.Qkey = a.Qkey
	}
	if mask&QPAttrAV != 0 {
		c.Dest = a.AV.dest()
	}
	if mask&QPAttrPathMTU != 0 {
		c.Path_mtu = a.PathMTU
	}
	if mask&QPAttrTimeout != 0 {
		c.Timeout = a.Timeout
	}
	if mask&QPAttrRetryCnt != 0 {
		c.Retry_cnt = a.RetryCnt
	}
	if mask&QPAttrRNRRetry != 0 {
		c.Rnr_retry = a.RNRRetry
	}
	if mask&QPAttrRQPSN != 0 {
		c.Rq_psn = a.RQPSN
	}
	if mask&QPAttrMaxQPRdAtomic != 0 {
		c.Max_rd_atomic = a.MaxRdAtomic
	}
	if mask&QPAttrAltPath != 0 {
		c.Alt_pkey_index = a.AltPkeyIndex
		c.Alt_port_num = a.AltPort
		c.Alt_timeout = a.AltTimeout
		c.Alt_dest = a.AltPath.dest()
	}
	if mask&QPAttrMinRNRTimer != 0 {
		c.Min_rnr_timer = a.MinRNRTimer
	}
	if mask&QPAttrSQPSN != 0 {
		c.Sq_psn = a.SQPSN
	}
	if mask&QPAttrMaxDestRdAtomic != 0 {
		c.Max_dest_rd_atomic = a.MaxDestRdAtomic
	}
	if mask&QPAttrPathMigState != 0 {
		c.Path_mig_state = a.PathMigState
	}
	if mask&QPAttrDestQPN != 0 {
		c.Dest_qp_num = a.DestQPN
	}
	return c
}

// QPAttrFromModify decodes a MODIFY_QP command (for an emulated kernel). The mask is in
// cmd.Attr_mask; fields outside it are whatever the caller sent (zero from this package).
func QPAttrFromModify(c *ModifyQPCmd) QPAttr {
	return QPAttr{
		State: c.Qp_state, CurState: c.Cur_qp_state, EnSQDAsyncNotify: c.En_sqd_async_notify != 0,
		AccessFlags: c.Qp_access_flags, PkeyIndex: c.Pkey_index, Port: c.Port_num, Qkey: c.Qkey,
		AV: PathFromDest(c.Dest), PathMTU: c.Path_mtu, Timeout: c.Timeout, RetryCnt: c.Retry_cnt,
		RNRRetry: c.Rnr_retry, RQPSN: c.Rq_psn, MaxRdAtomic: c.Max_rd_atomic,
		AltPath: PathFromDest(c.Alt_dest), AltPkeyIndex: c.Alt_pkey_index, AltPort: c.Alt_port_num,
		AltTimeout: c.Alt_timeout, MinRNRTimer: c.Min_rnr_timer, SQPSN: c.Sq_psn,
		MaxDestRdAtomic: c.Max_dest_rd_atomic, PathMigState: c.Path_mig_state, DestQPN: c.Dest_qp_num,
	}
}

// QPAttrFromQuery decodes a QUERY_QP response.
func QPAttrFromQuery(r *QueryQPResp) QPAttr {
	return QPAttr{
		State: r.Qp_state, CurState: r.Cur_qp_state, AccessFlags: r.Qp_access_flags,
		PkeyIndex: r.Pkey_index, Port: r.Port_num, Qkey: r.Qkey, AV: PathFromDest(r.Dest),
		PathMTU: r.Path_mtu, Timeout: r.Timeout, RetryCnt: r.Retry_cnt, RNRRetry: r.Rnr_retry,
		RQPSN: r.Rq_psn, MaxRdAtomic: r.Max_rd_atomic, AltPath: PathFromDest(r.Alt_dest),
		AltPkeyIndex: r.Alt_pkey_index, AltPort: r.Alt_port_num, AltTimeout: r.Alt_timeout,
		MinRNRTimer: r.Min_rnr_timer, SQPSN: r.Sq_psn, MaxDestRdAtomic: r.Max_dest_rd_atomic,
		PathMigState: r.Path_mig_state, DestQPN: r.Dest_qp_num,
		Cap: QPCap{Send_wr: r.Max_send_wr, Recv_wr: r.Max_recv_wr, Send_sge: r.Max_send_sge,
			Recv_sge: r.Max_recv_sge, Inline_data: r.Max_inline_data},
		SQDraining: r.Sq_draining != 0, SigAll: r.Sq_sig_all != 0,
	}
}

// QueryResp encodes attributes as a QUERY_QP response (for an emulated kernel).
func (a *QPAttr) QueryResp() QueryQPResp {
	return QueryQPResp{
		Dest: a.AV.dest(), Alt_dest: a.AltPath.dest(),
		Max_send_wr: a.Cap.Send_wr, Max_recv_wr: a.Cap.Recv_wr, Max_send_sge: a.Cap.Send_sge,
		Max_recv_sge: a.Cap.Recv_sge, Max_inline_data: a.Cap.Inline_data,
		Qkey: a.Qkey, Rq_psn: a.RQPSN, Sq_psn: a.SQPSN, Dest_qp_num: a.DestQPN,
		Qp_access_flags: a.AccessFlags, Pkey_index: a.PkeyIndex, Alt_pkey_index: a.AltPkeyIndex,
		Qp_state: a.State, Cur_qp_state: a.CurState, Path_mtu: a.PathMTU, Path_mig_state: a.PathMigState,
		Sq_draining: boolU8(a.SQDraining), Max_rd_atomic: a.MaxRdAtomic, Max_dest_rd_atomic: a.MaxDestRdAtomic,
		Min_rnr_timer: a.MinRNRTimer, Port_num: a.Port, Timeout: a.Timeout, Retry_cnt: a.RetryCnt,
		Rnr_retry: a.RNRRetry, Alt_port_num: a.AltPort, Alt_timeout: a.AltTimeout, Sq_sig_all: boolU8(a.SigAll),
	}
}
