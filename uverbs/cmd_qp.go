package uverbs

// QP commands. rdma-core 44 for mlx5: QPs are created and destroyed with the QP_CREATE /
// QP_DESTROY ioctls (cmd_qp.c, ibv_cmd_create_qp_ex2); modify uses the legacy write MODIFY_QP
// unless an attribute needs the extended one (rate limit, ECE); query is the legacy write
// QUERY_QP (cmd.c). The other paths are here too.

// CreateQPRequest describes a QP to create.
type CreateQPRequest struct {
	Type       uint8 // QPType* (RC for SHIFT)
	PD         uint32
	SendCQ     uint32
	RecvCQ     uint32
	SRQ        uint32 // used when HasSRQ
	HasSRQ     bool
	Cap        QPCap
	SigAll     bool   // every send WR generates a completion
	UserHandle uint64 // returned in async events
	Flags      uint32 // IB_UVERBS_QP_CREATE_* (ioctl) / create_flags (extended write)
	AsyncFD    int    // the context's async fd (ioctl path), or -1
}

// QP is a created QP.
type QP struct {
	Handle uint32
	QPN    uint32
	Cap    QPCap // what the kernel actually granted
}

// CreateQP creates a QP with the QP_CREATE ioctl.
func CreateQP(f File, driverID uint32, r CreateQPRequest, driverIn, driverOut []byte) (QP, error) {
	var respCap QPCap
	var qpn [4]byte
	c := NewIoctl(ObjectQP, MethodQPCreate, driverID)
	c.InObj(AttrCreateQPPDHandle, r.PD)
	c.InObj(AttrCreateQPSendCQHandle, r.SendCQ)
	c.InObj(AttrCreateQPRecvCQHandle, r.RecvCQ)
	h := c.OutObj(AttrCreateQPHandle)
	c.InU64(AttrCreateQPType, uint64(r.Type))
	c.InU64(AttrCreateQPUserHandle, r.UserHandle)
	reqCap := r.Cap
	c.In(AttrCreateQPCap, structBytes(&reqCap))
	if r.AsyncFD >= 0 {
		c.InFD(AttrCreateQPEventFD, r.AsyncFD)
	}
	flags := r.Flags
	if r.SigAll {
		flags |= QPCreateSQSigAll
	}
	if flags != 0 {
		c.InU32(AttrCreateQPFlags, flags)
	}
	if r.HasSRQ {
		c.InObj(AttrCreateQPSRQHandle, r.SRQ)
	}
	c.Out(AttrCreateQPRespCap, structBytes(&respCap))
	c.Out(AttrCreateQPRespQPNum, qpn[:])
	c.UHW(driverIn, driverOut)
	if err := c.Exec(f, "ioctl QP_CREATE"); err != nil {
		return QP{}, err
	}
	return QP{Handle: c.Obj(h), QPN: fromBytes[uint32](qpn[:]), Cap: respCap}, nil
}

func boolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// CreateQPWrite creates a QP with the legacy write CREATE_QP.
func CreateQPWrite(f File, r CreateQPRequest, driverIn, driverOut []byte) (QP, error) {
	cmd := CreateQPCmd{User_handle: r.UserHandle, Pd_handle: r.PD, Send_cq_handle: r.SendCQ,
		Recv_cq_handle: r.RecvCQ, Srq_handle: r.SRQ, Max_send_wr: r.Cap.Send_wr, Max_recv_wr: r.Cap.Recv_wr,
		Max_send_sge: r.Cap.Send_sge, Max_recv_sge: r.Cap.Recv_sge, Max_inline_data: r.Cap.Inline_data,
		Sq_sig_all: boolU8(r.SigAll), Qp_type: r.Type, Is_srq: boolU8(r.HasSRQ)}
	var resp CreateQPResp
	if err := Write(f, CmdCreateQP, structBytes(&cmd), driverIn, structBytes(&resp), driverOut); err != nil {
		return QP{}, err
	}
	return qpFromResp(resp), nil
}

// CreateQPEx creates a QP with the extended write CREATE_QP.
func CreateQPEx(f File, r CreateQPRequest, driverIn, driverOut []byte) (QP, error) {
	cmd := ExCreateQPCmd{User_handle: r.UserHandle, Pd_handle: r.PD, Send_cq_handle: r.SendCQ,
		Recv_cq_handle: r.RecvCQ, Srq_handle: r.SRQ, Max_send_wr: r.Cap.Send_wr, Max_recv_wr: r.Cap.Recv_wr,
		Max_send_sge: r.Cap.Send_sge, Max_recv_sge: r.Cap.Recv_sge, Max_inline_data: r.Cap.Inline_data,
		Sq_sig_all: boolU8(r.SigAll), Qp_type: r.Type, Is_srq: boolU8(r.HasSRQ), Create_flags: r.Flags}
	var resp ExCreateQPResp
	if err := WriteEx(f, ExCmdCreateQP, structBytes(&cmd), driverIn, structBytes(&resp), driverOut); err != nil {
		return QP{}, err
	}
	return qpFromResp(resp.Base), nil
}

func qpFromResp(r CreateQPResp) QP {
	return QP{Handle: r.Qp_handle, QPN: r.Qpn, Cap: QPCap{Send_wr: r.Max_send_wr, Recv_wr: r.Max_recv_wr,
		Send_sge: r.Max_send_sge, Recv_sge: r.Max_recv_sge, Inline_data: r.Max_inline_data}}
}

// DestroyQP destroys a QP with the QP_DESTROY ioctl and returns the number of async events
// the kernel reported for it.
func DestroyQP(f File, driverID uint32, handle uint32) (uint32, error) {
	var resp DestroyQPResp
	c := NewIoctl(ObjectQP, MethodQPDestroy, driverID)
	c.InObj(AttrDestroyQPHandle, handle)
	c.Out(AttrDestroyQPResp, structBytes(&resp))
	err := c.Exec(f, "ioctl QP_DESTROY")
	return resp.Reported, err
}

// DestroyQPWrite destroys a QP with the legacy write DESTROY_QP.
func DestroyQPWrite(f File, handle uint32) (uint32, error) {
	cmd := DestroyQPCmd{Handle: handle}
	var resp DestroyQPResp
	err := Write(f, CmdDestroyQP, structBytes(&cmd), nil, structBytes(&resp), nil)
	return resp.Reported, err
}

// ModifyQP changes the attributes of a QP selected by mask (QPAttr* bits) with the legacy
// write MODIFY_QP. Only the fields mask selects are sent, as rdma-core's copy_modify_qp_fields
// does; QPAttrRateLimit needs ModifyQPEx (EOPNOTSUPP here, as in rdma-core).
func ModifyQP(f File, handle uint32, a *QPAttr, mask uint32, driverIn []byte) error {
	if mask&^(QPAttrRateLimit-1) != 0 {
		return &CmdError{Op: "write MODIFY_QP", Errno: errEOPNOTSUPP}
	}
	cmd := a.modifyCmd(handle, mask)
	return Write(f, CmdModifyQP, structBytes(&cmd), driverIn, nil, nil)
}

// ModifyQPEx is ModifyQP over the extended write MODIFY_QP, which also carries the rate limit.
func ModifyQPEx(f File, handle uint32, a *QPAttr, mask uint32, driverIn, driverOut []byte) (ExModifyQPResp, error) {
	cmd := ExModifyQPCmd{Base: a.modifyCmd(handle, mask)}
	if mask&QPAttrRateLimit != 0 {
		cmd.Limit = a.RateLimit
	}
	var resp ExModifyQPResp
	err := WriteEx(f, ExCmdModifyQP, structBytes(&cmd), driverIn, structBytes(&resp), driverOut)
	return resp, err
}

// QueryQP reads the attributes selected by mask (the kernel fills all it has) with the legacy
// write QUERY_QP, and the QP's init attributes (capabilities, sq_sig_all).
func QueryQP(f File, handle uint32, mask uint32, driverIn []byte) (QPAttr, error) {
	cmd := QueryQPCmd{Qp_handle: handle, Attr_mask: mask}
	var resp QueryQPResp
	if err := Write(f, CmdQueryQP, structBytes(&cmd), driverIn, structBytes(&resp), nil); err != nil {
		return QPAttr{}, err
	}
	return QPAttrFromQuery(&resp), nil
}
