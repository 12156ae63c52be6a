package uverbs

// Completion channels and CQs. rdma-core 44: ibv_create_comp_channel uses the legacy write
// CREATE_COMP_CHANNEL (there is no ioctl for it); CQs are created and destroyed with the
// CQ_CREATE / CQ_DESTROY ioctls (cmd_cq.c), with the legacy and extended writes as fallback.

// CreateCompChannel creates a completion event channel and returns its fd (owned by the
// caller).
func CreateCompChannel(f File) (int, error) {
	var cmd CreateCompChannelCmd
	var resp CreateCompChannelResp
	if err := Write(f, CmdCreateCompChannel, structBytes(&cmd), nil, structBytes(&resp), nil); err != nil {
		return -1, err
	}
	return int(int32(resp.Fd)), nil
}

// CreateCQRequest describes a CQ to create.
type CreateCQRequest struct {
	CQE         uint32 // minimum number of entries
	UserHandle  uint64 // returned in completion and async events
	CompChannel int    // completion channel fd, or -1 for none
	CompVector  uint32
	Flags       uint32 // CQFlags* (ioctl and extended paths only)
	AsyncFD     int    // the context's async fd for the CQ's events (ioctl path), or -1
}

// CQ is a created CQ.
type CQ struct {
	Handle uint32
	CQE    uint32 // actual number of entries
}

// CreateCQ creates a CQ with the CQ_CREATE ioctl (the path rdma-core takes for mlx5).
func CreateCQ(f File, driverID uint32, r CreateCQRequest, driverIn, driverOut []byte) (CQ, error) {
	var cqe [4]byte
	c := NewIoctl(ObjectCQ, MethodCQCreate, driverID)
	h := c.OutObj(AttrCreateCQHandle)
	c.Out(AttrCreateCQRespCQE, cqe[:])
	c.InU32(AttrCreateCQCQE, r.CQE)
	c.InU64(AttrCreateCQUserHandle, r.UserHandle)
	if r.CompChannel >= 0 {
		c.InFD(AttrCreateCQCompChannel, r.CompChannel)
	}
	c.InU32(AttrCreateCQCompVector, r.CompVector)
	if r.AsyncFD >= 0 {
		c.Optional(c.InFD(AttrCreateCQEventFD, r.AsyncFD))
	}
	if r.Flags != 0 {
		c.InU32(AttrCreateCQFlags, r.Flags)
	}
	c.UHW(driverIn, driverOut)
	if err := c.Exec(f, "ioctl CQ_CREATE"); err != nil {
		return CQ{}, err
	}
	return CQ{Handle: c.Obj(h), CQE: fromBytes[uint32](cqe[:])}, nil
}

// CreateCQWrite creates a CQ with the legacy write CREATE_CQ (no flags).
func CreateCQWrite(f File, r CreateCQRequest, driverIn, driverOut []byte) (CQ, error) {
	cmd := CreateCQCmd{User_handle: r.UserHandle, Cqe: r.CQE, Comp_vector: r.CompVector, Comp_channel: int32(r.CompChannel)}
	var resp CreateCQResp
	if err := Write(f, CmdCreateCQ, structBytes(&cmd), driverIn, structBytes(&resp), driverOut); err != nil {
		return CQ{}, err
	}
	return CQ{Handle: resp.Handle, CQE: resp.Cqe}, nil
}

// CreateCQEx creates a CQ with the extended write CREATE_CQ.
func CreateCQEx(f File, r CreateCQRequest, driverIn, driverOut []byte) (CQ, error) {
	cmd := ExCreateCQCmd{User_handle: r.UserHandle, Cqe: r.CQE, Comp_vector: r.CompVector,
		Comp_channel: int32(r.CompChannel), Flags: r.Flags}
	var resp ExCreateCQResp
	if err := WriteEx(f, ExCmdCreateCQ, structBytes(&cmd), driverIn, structBytes(&resp), driverOut); err != nil {
		return CQ{}, err
	}
	return CQ{Handle: resp.Base.Handle, CQE: resp.Base.Cqe}, nil
}

// DestroyCQ destroys a CQ with the CQ_DESTROY ioctl and returns how many completion and
// async events the kernel reported for it (the counts ibv_destroy_cq waits for the
// application to acknowledge).
func DestroyCQ(f File, driverID uint32, handle uint32) (DestroyCQResp, error) {
	var resp DestroyCQResp
	c := NewIoctl(ObjectCQ, MethodCQDestroy, driverID)
	c.InObj(AttrDestroyCQHandle, handle)
	c.Out(AttrDestroyCQResp, structBytes(&resp))
	err := c.Exec(f, "ioctl CQ_DESTROY")
	return resp, err
}

// DestroyCQWrite destroys a CQ with the legacy write DESTROY_CQ.
func DestroyCQWrite(f File, handle uint32) (DestroyCQResp, error) {
	cmd := DestroyCQCmd{Handle: handle}
	var resp DestroyCQResp
	err := Write(f, CmdDestroyCQ, structBytes(&cmd), nil, structBytes(&resp), nil)
	return resp, err
}

// ReqNotifyCQ arms a CQ through the kernel with the legacy write REQ_NOTIFY_CQ: the next
// completion (or the next solicited one) raises one completion event on the CQ's channel.
// mlx5 arms CQs from user space instead; providers without a user-space arm (rxe) use this.
func ReqNotifyCQ(f File, handle uint32, solicitedOnly bool) error {
	cmd := ReqNotifyCQCmd{Cq_handle: handle, Solicited_only: uint32(boolU8(solicitedOnly))}
	return Write(f, CmdReqNotifyCQ, structBytes(&cmd), nil, nil, nil)
}
