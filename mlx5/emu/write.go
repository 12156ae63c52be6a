package emu

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/uverbs"
)

// Write decodes one legacy or extended write() command as ib_uverbs_write does and runs it.
// The returned error wraps the unix.Errno the kernel would return.
func (f *File) Write(buf []byte) error {
	w, err := uverbs.ParseWrite(buf)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errIfClosed(); err != nil {
		return err
	}
	if w.Extended {
		return traced(f.writeEx(w))
	}
	return traced(f.write(w))
}

// debugErr, when set (by tests), sees every command error with its full message: the
// uverbs client keeps only the errno, as with the real kernel.
var debugErr func(error)

func traced(err error) error {
	if err != nil && debugErr != nil {
		debugErr(err)
	}
	return err
}

func (f *File) write(w *uverbs.WriteRequest) error {
	switch w.Command {
	case uverbs.CmdGetContext:
		return f.wGetContext(w)
	case uverbs.CmdQueryDevice:
		return f.wQueryDevice(w)
	case uverbs.CmdQueryPort:
		return f.wQueryPort(w)
	case uverbs.CmdAllocPD:
		return f.wAllocPD(w)
	case uverbs.CmdDeallocPD:
		return f.wDeallocPD(w)
	case uverbs.CmdRegMR:
		return f.wRegMR(w)
	case uverbs.CmdDeregMR:
		return f.wDeregMR(w)
	case uverbs.CmdCreateCompChannel:
		return f.wCreateCompChannel(w)
	case uverbs.CmdCreateCQ:
		return f.wCreateCQ(w)
	case uverbs.CmdDestroyCQ:
		return f.wDestroyCQ(w)
	case uverbs.CmdCreateQP:
		return f.wCreateQP(w)
	case uverbs.CmdQueryQP:
		return f.wQueryQP(w)
	case uverbs.CmdModifyQP:
		return f.wModifyQP(w, false)
	case uverbs.CmdDestroyQP:
		return f.wDestroyQP(w)
	}
	return fmt.Errorf("write command %d: not supported by the emulated mlx5: %w", w.Command, unix.EOPNOTSUPP)
}

func (f *File) writeEx(w *uverbs.WriteRequest) error {
	switch w.Command {
	case uverbs.ExCmdQueryDevice:
		return f.wQueryDeviceEx(w)
	case uverbs.ExCmdCreateCQ:
		return f.wCreateCQEx(w)
	case uverbs.ExCmdCreateQP:
		return f.wCreateQPEx(w)
	case uverbs.ExCmdModifyQP:
		return f.wModifyQP(w, true)
	}
	return fmt.Errorf("write ex command %d: not supported by the emulated mlx5: %w", w.Command, unix.EOPNOTSUPP)
}

// sizes applies verify_hdr's size checks for a method's core structs.
func sizes[Req, Resp any](w *uverbs.WriteRequest, op string, hasResp bool) error {
	rs := 0
	if hasResp {
		rs = sizeOf[Resp]()
	}
	if err := w.CheckSizes(sizeOf[Req](), rs); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

type none struct{}

func respond[T any](w *uverbs.WriteRequest, op string, v *T) error {
	if err := w.Respond(encode(v)); err != nil {
		return fmt.Errorf("%s: response: %w", op, err)
	}
	return nil
}

func (f *File) wGetContext(w *uverbs.WriteRequest) error {
	const op = "get_context"
	if err := sizes[uverbs.GetContextCmd, uverbs.GetContextResp](w, op, true); err != nil {
		return err
	}
	resp, err := f.getContext(w.DriverIn(), w.DriverOutLen)
	if err != nil {
		return err
	}
	q, err := f.allocAsyncFd()
	if err != nil {
		f.undoContext()
		return err
	}
	core := uverbs.GetContextResp{Async_fd: uint32(q.userFd), Num_comp_vectors: f.dev.caps.CompVectors}
	if err := respond(w, op, &core); err != nil {
		return err
	}
	return w.RespondDriver(resp)
}

// getContext runs mlx5_ib_alloc_ucontext on the driver data and returns the driver response
// bytes sized as the caller asked (response_length tells the library how much is valid).
func (f *File) getContext(in []byte, outLen int) ([]byte, error) {
	const op = "get_context"
	if f.hasContext {
		return nil, fmt.Errorf("%s: context exists: %w", op, unix.EINVAL)
	}
	var v2 bool
	switch {
	case len(in) == mlx5.AllocUcontextReqMinSize:
	case len(in) >= mlx5.AllocUcontextReqMinV2Size:
		// mlx5_ib_alloc_ucontext's min_req_v2 is offsetof(max_cqe_version): libmlx5 retries
		// with exactly that length for kernels that refuse fields they do not know.
		v2 = true
	default:
		return nil, fmt.Errorf("%s: driver data of %d bytes: %w", op, len(in), unix.EINVAL)
	}
	req, err := mlx5.DecodeAllocUcontextReq(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	resp, err := f.allocUcontext(req, v2)
	if err != nil {
		return nil, err
	}
	n := min(outLen, mlx5.AllocUcontextRespSize)
	resp.ResponseLength = uint32(n)
	b := make([]byte, mlx5.AllocUcontextRespSize)
	resp.Put(b)
	return b[:n], nil
}

func (f *File) undoContext() {
	f.releaseUARs()
	f.hasContext = false
}

func (f *File) allocAsyncFd() (*eventQueue, error) {
	q, err := newEventQueue(f.dev.name + " async events")
	if err != nil {
		return nil, fmt.Errorf("async event file: %w", err)
	}
	if !f.async.CompareAndSwap(nil, q) {
		// Only the first async event file receives the context's events, as
		// ufile->default_async_file.
		f.asyncMore = append(f.asyncMore, q)
	}
	return q, nil
}

func (f *File) wQueryDevice(w *uverbs.WriteRequest) error {
	const op = "query_device"
	if err := sizes[uverbs.QueryDeviceCmd, uverbs.QueryDeviceResp](w, op, true); err != nil {
		return err
	}
	if err := f.needContext(op); err != nil {
		return err
	}
	r := f.dev.queryDevice()
	return respond(w, op, &r)
}

func (f *File) wQueryDeviceEx(w *uverbs.WriteRequest) error {
	const op = "ex_query_device"
	if err := w.CheckSizes(sizeOf[uverbs.ExQueryDeviceCmd](), 0); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := f.needContext(op); err != nil {
		return err
	}
	cmd := decode[uverbs.ExQueryDeviceCmd](w.Core())
	if cmd.Mask != 0 || cmd.Reserved != 0 {
		return fmt.Errorf("%s: comp_mask %#x: %w", op, cmd.Mask, unix.EINVAL)
	}
	r := f.dev.queryDeviceEx()
	// The extended response is as long as the caller's buffer allows; response_length says
	// how much of it the kernel filled.
	n := min(w.CoreOutLen, sizeOf[uverbs.ExQueryDeviceResp]())
	if n < sizeOf[uverbs.QueryDeviceResp]()+8 {
		return fmt.Errorf("%s: response of %d bytes: %w", op, w.CoreOutLen, unix.ENOSPC)
	}
	r.Response_length = uint32(n)
	return respond(w, op, &r)
}

func (f *File) wQueryPort(w *uverbs.WriteRequest) error {
	const op = "query_port"
	if err := sizes[uverbs.QueryPortCmd, uverbs.QueryPortResp](w, op, true); err != nil {
		return err
	}
	if err := f.needContext(op); err != nil {
		return err
	}
	cmd := decode[uverbs.QueryPortCmd](w.Core())
	r, err := f.dev.queryPort(int(cmd.Num))
	if err != nil {
		return err
	}
	return respond(w, op, &r)
}

// mlx5AllocPDResp is struct mlx5_ib_alloc_pd_resp { __u32 pdn; }.
type mlx5AllocPDResp struct{ Pdn uint32 }

func (f *File) wAllocPD(w *uverbs.WriteRequest) error {
	const op = "alloc_pd"
	if err := sizes[uverbs.AllocPDCmd, uverbs.AllocPDResp](w, op, true); err != nil {
		return err
	}
	h, err := f.allocPD()
	if err != nil {
		return err
	}
	r := uverbs.AllocPDResp{Handle: h}
	if err := respond(w, op, &r); err != nil {
		_ = f.deallocPDLocked(h)
		return err
	}
	o, _ := f.handles.get(objPD, h)
	return w.RespondDriver(encode(&mlx5AllocPDResp{Pdn: o.(*pdObj).pdn}))
}

func (f *File) wDeallocPD(w *uverbs.WriteRequest) error {
	const op = "dealloc_pd"
	if err := sizes[uverbs.DeallocPDCmd, none](w, op, false); err != nil {
		return err
	}
	if err := f.needContext(op); err != nil {
		return err
	}
	cmd := decode[uverbs.DeallocPDCmd](w.Core())
	if err := f.deallocPDLocked(cmd.Handle); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

func (f *File) wRegMR(w *uverbs.WriteRequest) error {
	const op = "reg_mr"
	if err := sizes[uverbs.RegMRCmd, uverbs.RegMRResp](w, op, true); err != nil {
		return err
	}
	cmd := decode[uverbs.RegMRCmd](w.Core())
	h, lkey, rkey, err := f.regMR(cmd.Pd_handle, cmd.Start, cmd.Length, cmd.Hca_va, cmd.Access_flags)
	if err != nil {
		return err
	}
	r := uverbs.RegMRResp{Handle: h, Lkey: lkey, Rkey: rkey}
	if err := respond(w, op, &r); err != nil {
		_ = f.deregMRLocked(h)
		return err
	}
	return nil
}

func (f *File) wDeregMR(w *uverbs.WriteRequest) error {
	const op = "dereg_mr"
	if err := sizes[uverbs.DeregMRCmd, none](w, op, false); err != nil {
		return err
	}
	if err := f.needContext(op); err != nil {
		return err
	}
	cmd := decode[uverbs.DeregMRCmd](w.Core())
	return f.deregMRLocked(cmd.Handle)
}

func (f *File) wCreateCompChannel(w *uverbs.WriteRequest) error {
	const op = "create_comp_channel"
	if err := sizes[uverbs.CreateCompChannelCmd, uverbs.CreateCompChannelResp](w, op, true); err != nil {
		return err
	}
	fd, err := f.createCompChannel()
	if err != nil {
		return err
	}
	r := uverbs.CreateCompChannelResp{Fd: uint32(fd)}
	return respond(w, op, &r)
}

func (f *File) wCreateCQ(w *uverbs.WriteRequest) error {
	const op = "create_cq"
	if err := sizes[uverbs.CreateCQCmd, uverbs.CreateCQResp](w, op, true); err != nil {
		return err
	}
	cmd := decode[uverbs.CreateCQCmd](w.Core())
	return f.createCQCommon(w, op, cmd.User_handle, cmd.Cqe, cmd.Comp_vector, cmd.Comp_channel, false)
}

func (f *File) wCreateCQEx(w *uverbs.WriteRequest) error {
	const op = "ex_create_cq"
	if err := sizes[uverbs.ExCreateCQCmd, uverbs.ExCreateCQResp](w, op, true); err != nil {
		return err
	}
	cmd := decode[uverbs.ExCreateCQCmd](w.Core())
	if cmd.Comp_mask != 0 || cmd.Reserved != 0 {
		return fmt.Errorf("%s: comp_mask %#x: %w", op, cmd.Comp_mask, unix.EINVAL)
	}
	if cmd.Flags != 0 {
		return fmt.Errorf("%s: flags %#x: %w", op, cmd.Flags, unix.EOPNOTSUPP)
	}
	return f.createCQCommon(w, op, cmd.User_handle, cmd.Cqe, cmd.Comp_vector, cmd.Comp_channel, true)
}

func (f *File) createCQCommon(w *uverbs.WriteRequest, op string, uh uint64, cqe, vec uint32, ch int32, ex bool) error {
	ud, err := mlx5.DecodeCreateCQ(w.DriverIn())
	if err != nil {
		return fmt.Errorf("%s: %w", op, unix.EINVAL)
	}
	h, n, cqn, err := f.createCQ(uh, cqe, vec, ch, ud)
	if err != nil {
		return err
	}
	if ex {
		r := uverbs.ExCreateCQResp{Base: uverbs.CreateCQResp{Handle: h, Cqe: n}, Response_length: uint32(sizeOf[uverbs.ExCreateCQResp]())}
		err = respond(w, op, &r)
	} else {
		r := uverbs.CreateCQResp{Handle: h, Cqe: n}
		err = respond(w, op, &r)
	}
	if err == nil {
		dr := mlx5.CreateCQResp{CQN: cqn}
		b := make([]byte, mlx5.CreateCQRespSize)
		dr.Put(b)
		err = w.RespondDriver(b)
	}
	if err != nil {
		_, _, _ = f.destroyCQLocked(h)
	}
	return err
}

func (f *File) wDestroyCQ(w *uverbs.WriteRequest) error {
	const op = "destroy_cq"
	if err := sizes[uverbs.DestroyCQCmd, uverbs.DestroyCQResp](w, op, true); err != nil {
		return err
	}
	if err := f.needContext(op); err != nil {
		return err
	}
	cmd := decode[uverbs.DestroyCQCmd](w.Core())
	comp, async, err := f.destroyCQLocked(cmd.Handle)
	if err != nil {
		return err
	}
	r := uverbs.DestroyCQResp{Comp_events_reported: comp, Async_events_reported: async}
	return respond(w, op, &r)
}

func (f *File) wCreateQP(w *uverbs.WriteRequest) error {
	const op = "create_qp"
	if err := sizes[uverbs.CreateQPCmd, uverbs.CreateQPResp](w, op, true); err != nil {
		return err
	}
	cmd := decode[uverbs.CreateQPCmd](w.Core())
	req := createQPReq{
		userHandle: cmd.User_handle, pd: cmd.Pd_handle, sendCQ: cmd.Send_cq_handle, recvCQ: cmd.Recv_cq_handle,
		srq: cmd.Srq_handle, isSRQ: cmd.Is_srq != 0, sqSigAll: cmd.Sq_sig_all != 0, qpType: cmd.Qp_type,
		cap: qpCap{cmd.Max_send_wr, cmd.Max_recv_wr, cmd.Max_send_sge, cmd.Max_recv_sge, cmd.Max_inline_data},
	}
	return f.createQPCommon(w, op, req, false)
}

func (f *File) wCreateQPEx(w *uverbs.WriteRequest) error {
	const op = "ex_create_qp"
	if err := sizes[uverbs.ExCreateQPCmd, uverbs.ExCreateQPResp](w, op, true); err != nil {
		return err
	}
	cmd := decode[uverbs.ExCreateQPCmd](w.Core())
	if cmd.Comp_mask != 0 {
		return fmt.Errorf("%s: comp_mask %#x: %w", op, cmd.Comp_mask, unix.EINVAL)
	}
	req := createQPReq{
		userHandle: cmd.User_handle, pd: cmd.Pd_handle, sendCQ: cmd.Send_cq_handle, recvCQ: cmd.Recv_cq_handle,
		srq: cmd.Srq_handle, isSRQ: cmd.Is_srq != 0, sqSigAll: cmd.Sq_sig_all != 0, qpType: cmd.Qp_type,
		cap:         qpCap{cmd.Max_send_wr, cmd.Max_recv_wr, cmd.Max_send_sge, cmd.Max_recv_sge, cmd.Max_inline_data},
		createFlags: cmd.Create_flags,
	}
	return f.createQPCommon(w, op, req, true)
}

func (f *File) createQPCommon(w *uverbs.WriteRequest, op string, req createQPReq, ex bool) error {
	ud, err := mlx5.DecodeCreateQP(w.DriverIn())
	if err != nil {
		return fmt.Errorf("%s: %w", op, unix.EINVAL)
	}
	req.ud = ud
	qp, dresp, err := f.createQP(req)
	if err != nil {
		return err
	}
	base := uverbs.CreateQPResp{Qp_handle: qp.handle, Qpn: qp.qpn, Max_send_wr: qp.cap.maxSendWR,
		Max_recv_wr: qp.cap.maxRecvWR, Max_send_sge: qp.cap.maxSendSGE, Max_recv_sge: qp.cap.maxRecvSGE,
		Max_inline_data: qp.cap.maxInline}
	if ex {
		r := uverbs.ExCreateQPResp{Base: base, Response_length: uint32(sizeOf[uverbs.ExCreateQPResp]())}
		err = respond(w, op, &r)
	} else {
		err = respond(w, op, &base)
	}
	if err == nil {
		b := make([]byte, mlx5.CreateQPRespSize)
		dresp.Put(b)
		err = w.RespondDriver(b)
	}
	if err != nil {
		_, _ = f.destroyQPLocked(qp.handle)
	}
	return err
}

func (f *File) wDestroyQP(w *uverbs.WriteRequest) error {
	const op = "destroy_qp"
	if err := sizes[uverbs.DestroyQPCmd, uverbs.DestroyQPResp](w, op, true); err != nil {
		return err
	}
	if err := f.needContext(op); err != nil {
		return err
	}
	cmd := decode[uverbs.DestroyQPCmd](w.Core())
	n, err := f.destroyQPLocked(cmd.Handle)
	if err != nil {
		return err
	}
	r := uverbs.DestroyQPResp{Reported: n}
	return respond(w, op, &r)
}

func (f *File) wModifyQP(w *uverbs.WriteRequest, ex bool) error {
	const op = "modify_qp"
	var cmd uverbs.ModifyQPCmd
	if ex {
		if err := w.CheckSizes(sizeOf[uverbs.ExModifyQPCmd](), 0); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		c := decode[uverbs.ExModifyQPCmd](w.Core())
		cmd = c.Base
	} else {
		if err := sizes[uverbs.ModifyQPCmd, none](w, op, false); err != nil {
			return err
		}
		cmd = decode[uverbs.ModifyQPCmd](w.Core())
	}
	r := modifyQPReq{handle: cmd.Qp_handle, mask: QPAttrMask(cmd.Attr_mask), ex: ex, attr: qpAttr{
		state: QPState(cmd.Qp_state), curState: QPState(cmd.Cur_qp_state), accessFlags: cmd.Qp_access_flags,
		pkeyIndex: cmd.Pkey_index, port: cmd.Port_num, qkey: cmd.Qkey, pathMTU: MTU(cmd.Path_mtu),
		timeout: cmd.Timeout, retryCnt: cmd.Retry_cnt, rnrRetry: cmd.Rnr_retry, rqPSN: cmd.Rq_psn,
		sqPSN: cmd.Sq_psn, maxRdAtomic: cmd.Max_rd_atomic, maxDestRdAtomic: cmd.Max_dest_rd_atomic,
		minRNRTimer: cmd.Min_rnr_timer, destQPN: cmd.Dest_qp_num, pathMigState: cmd.Path_mig_state,
		av: avFromDest(&cmd.Dest),
	}}
	if err := f.modifyQP(r); err != nil {
		return err
	}
	if ex && w.Response != 0 {
		resp := uverbs.ExModifyQPResp{Response_length: uint32(min(w.CoreOutLen, sizeOf[uverbs.ExModifyQPResp]()))}
		return respond(w, op, &resp)
	}
	return nil
}

func avFromDest(d *uverbs.QPDest) addrVector {
	return addrVector{dgid: d.Dgid, flowLabel: d.Flow_label, sgidIndex: d.Sgid_index, hopLimit: d.Hop_limit,
		trafficClass: d.Traffic_class, sl: d.Sl, staticRate: d.Static_rate, isGlobal: d.Is_global != 0, portNum: d.Port_num}
}

func destFromAV(a *addrVector) uverbs.QPDest {
	d := uverbs.QPDest{Dgid: a.dgid, Flow_label: a.flowLabel, Sgid_index: a.sgidIndex, Hop_limit: a.hopLimit,
		Traffic_class: a.trafficClass, Sl: a.sl, Static_rate: a.staticRate, Port_num: a.portNum}
	if a.isGlobal {
		d.Is_global = 1
	}
	return d
}

func (f *File) wQueryQP(w *uverbs.WriteRequest) error {
	const op = "query_qp"
	if err := sizes[uverbs.QueryQPCmd, uverbs.QueryQPResp](w, op, true); err != nil {
		return err
	}
	cmd := decode[uverbs.QueryQPCmd](w.Core())
	a, c, sigAll, err := f.queryQP(cmd.Qp_handle)
	if err != nil {
		return err
	}
	r := uverbs.QueryQPResp{
		Dest: destFromAV(&a.av), Max_send_wr: c.maxSendWR, Max_recv_wr: c.maxRecvWR, Max_send_sge: c.maxSendSGE,
		Max_recv_sge: c.maxRecvSGE, Max_inline_data: c.maxInline, Qkey: a.qkey, Rq_psn: a.rqPSN, Sq_psn: a.sqPSN,
		Dest_qp_num: a.destQPN, Qp_access_flags: a.accessFlags, Pkey_index: a.pkeyIndex, Qp_state: uint8(a.state),
		Cur_qp_state: uint8(a.curState), Path_mtu: uint8(a.pathMTU), Path_mig_state: a.pathMigState,
		Max_rd_atomic: a.maxRdAtomic, Max_dest_rd_atomic: a.maxDestRdAtomic, Min_rnr_timer: a.minRNRTimer,
		Port_num: a.port, Timeout: a.timeout, Retry_cnt: a.retryCnt, Rnr_retry: a.rnrRetry,
	}
	if sigAll {
		r.Sq_sig_all = 1
	}
	return respond(w, op, &r)
}
