package emu

import (
	"fmt"
	"math/bits"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/uverbs"
)

// The verbs below are the kernel's command handlers with the wire format already decoded;
// the Write and Ioctl decoders call them. Each runs with f.mu held.

func (f *File) needContext(op string) error {
	if err := f.errIfClosed(); err != nil {
		return err
	}
	if !f.hasContext {
		// ib_uverbs_get_ucontext: no context yet.
		return fmt.Errorf("%s: no context: %w", op, unix.EINVAL)
	}
	return nil
}

func (f *File) allocPD() (uint32, error) {
	if err := f.needContext("alloc_pd"); err != nil {
		return 0, err
	}
	f.dev.mu.Lock()
	f.dev.nextPD++
	pd := &pdObj{pdn: f.dev.nextPD}
	f.dev.mu.Unlock()
	return f.handles.add(objPD, pd), nil
}

func (f *File) deallocPDLocked(h uint32) error {
	_, err := f.handles.remove(objPD, h, func(o any) error {
		if n := o.(*pdObj).usecnt.Load(); n != 0 {
			return fmt.Errorf("dealloc_pd %d: %d MRs/QPs still use it: %w", h, n, unix.EBUSY)
		}
		return nil
	})
	return err
}

// getPD is uobj_get_obj_read for a command input. Since upstream commit 81f8f7454ad9
// ("RDMA/uverbs: Propagate errors from rdma_lookup_get_uobject()", 2025, in the stable
// kernels too; measured ENOENT on Debian's 6.1.0-56) the lookup's errno reaches user space:
// ENOENT for a handle that does not exist, EINVAL for one of another type.
func (f *File) getPD(op string, h uint32) (*pdObj, error) {
	o, err := f.handles.get(objPD, h)
	if err != nil {
		return nil, fmt.Errorf("%s: pd: %w", op, err)
	}
	return o.(*pdObj), nil
}

func (f *File) getCQ(op string, h uint32) (*cqObj, error) {
	o, err := f.handles.get(objCQ, h)
	if err != nil {
		return nil, fmt.Errorf("%s: cq: %w", op, err)
	}
	return o.(*cqObj), nil
}

func (f *File) getQP(op string, h uint32) (*qpObj, error) {
	o, err := f.handles.get(objQP, h)
	if err != nil {
		return nil, fmt.Errorf("%s: qp: %w", op, err)
	}
	return o.(*qpObj), nil
}

const pageSize = 4096

// supportedAccess is IB_ACCESS_SUPPORTED without on-demand paging (not offered).
const supportedAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead |
	uverbs.AccessRemoteAtomic | uverbs.AccessMWBind | uverbs.AccessZeroBased | uverbs.AccessRelaxedOrdering |
	uverbs.AccessOptionalRange

// checkMRAccess is ib_check_mr_access.
func checkMRAccess(flags uint32) error {
	if flags&^supportedAccess != 0 {
		if flags&uverbs.AccessOnDemand != 0 {
			return fmt.Errorf("access %#x: on-demand paging not supported: %w", flags, unix.EOPNOTSUPP)
		}
		return fmt.Errorf("access %#x: unknown flags: %w", flags, unix.EINVAL)
	}
	// Remote write or atomic access needs local write (IBA 10.6.3.2).
	if flags&(uverbs.AccessRemoteWrite|uverbs.AccessRemoteAtomic) != 0 && flags&uverbs.AccessLocalWrite == 0 {
		return fmt.Errorf("access %#x: remote write/atomic without local write: %w", flags, unix.EINVAL)
	}
	return nil
}

func (f *File) regMR(pdh uint32, start, length, iova uint64, access uint32) (h, lkey, rkey uint32, err error) {
	const op = "reg_mr"
	if err := f.needContext(op); err != nil {
		return 0, 0, 0, err
	}
	// ib_uverbs_reg_mr: the start and the iova must share their offset in the page.
	if start%pageSize != iova%pageSize {
		return 0, 0, 0, fmt.Errorf("%s: start %#x and iova %#x differ in page offset: %w", op, start, iova, unix.EINVAL)
	}
	if err := checkMRAccess(access); err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	if length == 0 || start+length < start {
		return 0, 0, 0, fmt.Errorf("%s: range %#x+%d: %w", op, start, length, unix.EINVAL)
	}
	pd, err := f.getPD(op, pdh)
	if err != nil {
		return 0, 0, 0, err
	}
	// ib_umem_get pins the pages: an unmapped range fails with EFAULT.
	if err := checkMapped(start, length); err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %#x+%d: %w", op, start, length, err)
	}
	lkey, rkey, err = f.dev.hw.regMR(pd.pdn, start, length, iova, access)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	pd.usecnt.Add(1)
	mr := &mrObj{pd: pd, addr: start, length: length, iova: iova, access: access, lkey: lkey, rkey: rkey}
	return f.handles.add(objMR, mr), lkey, rkey, nil
}

func (f *File) deregMRLocked(h uint32) error {
	o, err := f.handles.remove(objMR, h, nil)
	if err != nil {
		return fmt.Errorf("dereg_mr: %w", err)
	}
	mr := o.(*mrObj)
	mr.pd.usecnt.Add(-1)
	return f.dev.hw.deregMR(mr.lkey)
}

func (f *File) createCompChannel() (int, error) {
	if err := f.needContext("create_comp_channel"); err != nil {
		return 0, err
	}
	q, err := newEventQueue(f.dev.name + " comp channel")
	if err != nil {
		return 0, fmt.Errorf("create_comp_channel: %w", err)
	}
	f.channels[q.userFd] = q
	return q.userFd, nil
}

// createCQ is ib_uverbs_create_cq + mlx5_ib_create_cq for a user CQ.
func (f *File) createCQ(userHandle uint64, cqe uint32, compVector uint32, channelFd int32, ud mlx5.CreateCQ) (h, ncqe, cqn uint32, err error) {
	const op = "create_cq"
	if err := f.needContext(op); err != nil {
		return 0, 0, 0, err
	}
	caps := &f.dev.caps
	if compVector >= caps.CompVectors {
		return 0, 0, 0, fmt.Errorf("%s: comp_vector %d of %d: %w", op, compVector, caps.CompVectors, unix.EINVAL)
	}
	// mlx5_ib_create_cq: entries < 0 or roundup_pow_of_two(entries + 1) beyond the device
	// limit is EINVAL. The user library sizes its buffer the same way.
	if int32(cqe) < 0 || cqe > caps.MaxCQE {
		return 0, 0, 0, fmt.Errorf("%s: %d entries (max %d): %w", op, cqe, caps.MaxCQE, unix.EINVAL)
	}
	n := uint32(1) << bits.Len32(cqe) // roundup_pow_of_two(cqe + 1)
	if ud.CQESize != 64 && ud.CQESize != 128 {
		return 0, 0, 0, fmt.Errorf("%s: cqe_size %d: %w", op, ud.CQESize, unix.EINVAL)
	}
	if ud.CQECompEn != 0 {
		return 0, 0, 0, fmt.Errorf("%s: CQE compression not emulated: %w", op, unix.EOPNOTSUPP)
	}
	if ud.Flags&^mlx5.CreateCQFlagUARPageIndex != 0 {
		return 0, 0, 0, fmt.Errorf("%s: flags %#x: %w", op, ud.Flags, unix.EOPNOTSUPP)
	}
	var ch *eventQueue
	if channelFd >= 0 {
		q, ok := f.channels[int(channelFd)]
		if !ok {
			// ib_uverbs_lookup_comp_file: measured EBADF on Linux 6.1 for an fd that is not
			// a completion channel (the async fd, for instance).
			return 0, 0, 0, fmt.Errorf("%s: fd %d is not a completion channel of this context: %w", op, channelFd, unix.EBADF)
		}
		ch = q
	}
	if ud.BufAddr%64 != 0 {
		// The CQ context expresses the buffer's offset in its first page in 64-byte units.
		return 0, 0, 0, fmt.Errorf("%s: buffer %#x not 64-byte aligned: %w", op, ud.BufAddr, unix.EINVAL)
	}
	if err := checkMapped(ud.BufAddr, uint64(n)*uint64(ud.CQESize)); err != nil {
		return 0, 0, 0, fmt.Errorf("%s: buffer: %w", op, err)
	}
	if ud.DBAddr%8 != 0 {
		return 0, 0, 0, fmt.Errorf("%s: doorbell record %#x unaligned: %w", op, ud.DBAddr, unix.EINVAL)
	}
	if err := checkMapped(ud.DBAddr, 8); err != nil {
		return 0, 0, 0, fmt.Errorf("%s: doorbell record: %w", op, err)
	}
	// mlx5_ib_create_cq (create_cq_user): the CQ's doorbell page is the page id the flag
	// names, else the context's first static page; a dynamic-UAR context has none.
	var uar uarPage
	switch {
	case ud.Flags&mlx5.CreateCQFlagUARPageIndex != 0:
		u, ok := f.ctx.uarByPageID(uint32(ud.UARPageIndex))
		if !ok {
			return 0, 0, 0, fmt.Errorf("%s: uar page id %d is not this context's: %w", op, ud.UARPageIndex, unix.EINVAL)
		}
		uar = u
	case f.ctx.dynUARs:
		return 0, 0, 0, fmt.Errorf("%s: no uar page index on a dynamic-UAR context: %w", op, unix.EINVAL)
	default:
		uar = f.ctx.uars[0]
	}
	cqn, err = f.dev.hw.createCQ(cqSpec{bufAddr: ud.BufAddr, dbAddr: ud.DBAddr, ncqe: n, cqeSize: ud.CQESize, uar: uar})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	cq := &cqObj{file: f, userHandle: userHandle, cqn: cqn, ncqe: n, channel: ch}
	cq.handle = f.handles.add(objCQ, cq)
	f.dev.mu.Lock()
	f.dev.cqs[cqn] = cq
	f.dev.mu.Unlock()
	// The reported size is what the user may use: one entry stays free.
	return cq.handle, n - 1, cqn, nil
}

func (f *File) destroyCQLocked(h uint32) (comp, async uint32, err error) {
	o, err := f.handles.remove(objCQ, h, func(o any) error {
		if n := o.(*cqObj).usecnt.Load(); n != 0 {
			return fmt.Errorf("destroy_cq %d: %d QPs still use it: %w", h, n, unix.EBUSY)
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("destroy_cq: %w", err)
	}
	cq := o.(*cqObj)
	f.dev.mu.Lock()
	delete(f.dev.cqs, cq.cqn)
	f.dev.mu.Unlock()
	err = f.dev.hw.destroyCQ(cq.cqn)
	// Reported means read (see eventQueue.withdraw); an event raised from here on is dropped.
	cq.evMu.Lock()
	cq.dead = true
	cq.evMu.Unlock()
	comp, async = cq.compEvents.Load(), cq.asyncEvents.Load()
	if cq.channel != nil {
		comp -= uint32(cq.channel.withdraw(compFor(cq.userHandle)))
	}
	if q := f.async.Load(); q != nil {
		async -= uint32(q.withdraw(asyncFor(cq.userHandle, uverbs.EventCQErr)))
	}
	return comp, async, err
}

// createQPReq is what create_qp carries on either command path.
type createQPReq struct {
	userHandle         uint64
	pd, sendCQ, recvCQ uint32
	srq                uint32
	isSRQ              bool
	cap                qpCap
	sqSigAll           bool
	qpType             uint8
	createFlags        uint32
	ud                 mlx5.CreateQP
}

// createQP is ib_uverbs_create_qp + mlx5_ib_create_qp for an RC user QP.
func (f *File) createQP(r createQPReq) (*qpObj, mlx5.CreateQPResp, error) {
	const op = "create_qp"
	var resp mlx5.CreateQPResp
	if err := f.needContext(op); err != nil {
		return nil, resp, err
	}
	switch r.qpType {
	case uverbs.QPTypeRC:
	case uverbs.QPTypeUC, uverbs.QPTypeUD, uverbs.QPTypeRawPacket, uverbs.QPTypeXRCIni, uverbs.QPTypeXRCTgt, uverbs.QPTypeDriver:
		return nil, resp, fmt.Errorf("%s: QP type %d not emulated (RC only): %w", op, r.qpType, unix.EOPNOTSUPP)
	default:
		return nil, resp, fmt.Errorf("%s: QP type %d: %w", op, r.qpType, unix.EINVAL)
	}
	if r.isSRQ {
		return nil, resp, fmt.Errorf("%s: SRQ not emulated: %w", op, unix.EOPNOTSUPP)
	}
	if f.dev.beforeQP != nil {
		if err := f.dev.beforeQP(); err != nil {
			return nil, resp, fmt.Errorf("%s: %w", op, err)
		}
	}
	if r.createFlags&^uint32(uverbs.QPCreateSQSigAll) != 0 {
		return nil, resp, fmt.Errorf("%s: create flags %#x: %w", op, r.createFlags, unix.EOPNOTSUPP)
	}
	pd, err := f.getPD(op, r.pd)
	if err != nil {
		return nil, resp, err
	}
	scq, err := f.getCQ(op, r.sendCQ)
	if err != nil {
		return nil, resp, err
	}
	rcq, err := f.getCQ(op, r.recvCQ)
	if err != nil {
		return nil, resp, err
	}
	caps := &f.dev.caps
	c := r.cap
	if c.maxSendWR > caps.MaxQPWR || c.maxRecvWR > caps.MaxQPWR || c.maxSendSGE > caps.MaxSGE ||
		c.maxRecvSGE > caps.MaxSGE || c.maxInline > caps.MaxInlineData {
		return nil, resp, fmt.Errorf("%s: cap %+v beyond device limits: %w", op, c, unix.EINVAL)
	}
	ud := r.ud
	// set_user_buf_size / set_rq_size of mlx5_ib.
	if ud.SQWQECount == 0 || ud.SQWQECount&(ud.SQWQECount-1) != 0 || ud.SQWQECount > caps.MaxQPWR {
		return nil, resp, fmt.Errorf("%s: sq_wqe_count %d: %w", op, ud.SQWQECount, unix.EINVAL)
	}
	if ud.RQWQECount&(ud.RQWQECount-1) != 0 || ud.RQWQECount > caps.MaxQPWR ||
		(ud.RQWQECount != 0 && (ud.RQWQEShift < 4 || ud.RQWQEShift > 12)) {
		return nil, resp, fmt.Errorf("%s: rq_wqe_count %d shift %d: %w", op, ud.RQWQECount, ud.RQWQEShift, unix.EINVAL)
	}
	if c.maxRecvWR > ud.RQWQECount || c.maxSendWR > ud.SQWQECount {
		return nil, resp, fmt.Errorf("%s: cap %+v larger than the rings (sq %d, rq %d): %w", op, c, ud.SQWQECount, ud.RQWQECount, unix.EINVAL)
	}
	if ud.Flags&^uint32(mlx5.QPFlagSignature|mlx5.QPFlagScatterCQE|mlx5.QPFlagUARPageIndex) != 0 {
		return nil, resp, fmt.Errorf("%s: mlx5 flags %#x: %w", op, ud.Flags, unix.EOPNOTSUPP)
	}
	bufSize := uint64(ud.RQWQECount)<<ud.RQWQEShift + uint64(ud.SQWQECount)*mlx5.SendWQEBB
	if ud.BufAddr%64 != 0 {
		return nil, resp, fmt.Errorf("%s: buffer %#x unaligned: %w", op, ud.BufAddr, unix.EINVAL)
	}
	if err := checkMapped(ud.BufAddr, bufSize); err != nil {
		return nil, resp, fmt.Errorf("%s: buffer: %w", op, err)
	}
	if ud.DBAddr%8 != 0 {
		return nil, resp, fmt.Errorf("%s: doorbell record %#x unaligned: %w", op, ud.DBAddr, unix.EINVAL)
	}
	if err := checkMapped(ud.DBAddr, 8); err != nil {
		return nil, resp, fmt.Errorf("%s: doorbell record: %w", op, err)
	}
	// get_qp_user_index: with CQE version 1 the request carries the user index the CQEs
	// will name the QP by (24 bits); with version 0 it is ignored.
	var uidx uint32
	if f.ctx.cqeVersion == 1 {
		if ud.UIdx&^uint32(0xffffff) != 0 {
			return nil, resp, fmt.Errorf("%s: user index %#x: %w", op, ud.UIdx, unix.EINVAL)
		}
		uidx = ud.UIdx
	}
	// _create_user_qp: MLX5_QP_FLAG_UAR_PAGE_INDEX names a page the library allocated (its
	// bfreg is then the library's business); otherwise alloc_bfreg, which a dynamic-UAR
	// context cannot serve.
	spec := qpSpec{pdn: pd.pdn, bufAddr: ud.BufAddr, dbAddr: ud.DBAddr,
		sqWQECnt: ud.SQWQECount, rqWQECnt: ud.RQWQECount, rqWQEShift: ud.RQWQEShift,
		sendCQN: scq.cqn, recvCQN: rcq.cqn, sqSigAll: r.sqSigAll,
		maxSendSGE: c.maxSendSGE, maxRecvSGE: c.maxRecvSGE, maxInline: c.maxInline, userIndex: uidx}
	net := uint32(noBfreg)
	switch {
	case ud.Flags&mlx5.QPFlagUARPageIndex != 0:
		u, ok := f.ctx.uarByPageID(ud.BfregIndex)
		if !ok {
			return nil, resp, fmt.Errorf("%s: uar page id %d is not this context's: %w", op, ud.BfregIndex, unix.EINVAL)
		}
		spec.uar, spec.anyBfreg = u, true
	case f.ctx.dynUARs:
		return nil, resp, fmt.Errorf("%s: no uar page index on a dynamic-UAR context: %w", op, unix.EINVAL)
	default:
		var shared bool
		net, shared = f.ctx.allocBfreg()
		spec.uar, spec.bfreg = f.ctx.bfregPage(net)
		spec.sharedBfreg = shared
	}
	qpn, err := f.dev.hw.createQP(spec)
	if err != nil {
		f.ctx.freeBfreg(net)
		return nil, resp, fmt.Errorf("%s: %w", op, err)
	}
	qp := &qpObj{file: f, userHandle: r.userHandle, qpn: qpn, pd: pd, sendCQ: scq, recvCQ: rcq,
		cap: c, sqSigAll: r.sqSigAll, bfreg: net}
	qp.attr.state = QPSReset
	pd.usecnt.Add(1)
	scq.usecnt.Add(1)
	rcq.usecnt.Add(1)
	qp.handle = f.handles.add(objQP, qp)
	f.dev.mu.Lock()
	f.dev.qps[qpn] = qp
	f.dev.mu.Unlock()
	resp.BfregIndex = mlx5.InvalidBfreg
	if net != noBfreg {
		resp.BfregIndex = mlx5.GrossBfregIndex(net)
	}
	return qp, resp, nil
}

func (f *File) destroyQPLocked(h uint32) (uint32, error) {
	o, err := f.handles.remove(objQP, h, nil)
	if err != nil {
		return 0, fmt.Errorf("destroy_qp: %w", err)
	}
	qp := o.(*qpObj)
	f.dev.mu.Lock()
	delete(f.dev.qps, qp.qpn)
	f.dev.mu.Unlock()
	err = f.dev.hw.destroyQP(qp.qpn)
	f.ctx.freeBfreg(qp.bfreg)
	qp.pd.usecnt.Add(-1)
	qp.sendCQ.usecnt.Add(-1)
	qp.recvCQ.usecnt.Add(-1)
	qp.evMu.Lock()
	qp.dead = true
	qp.evMu.Unlock()
	n := qp.events.Load()
	if q := f.async.Load(); q != nil {
		n -= uint32(q.withdraw(asyncFor(qp.userHandle, uverbs.EventQPFatal, uverbs.EventQPReqErr, uverbs.EventQPAccessErr,
			uverbs.EventCommEst, uverbs.EventSQDrained, uverbs.EventPathMig, uverbs.EventPathMigErr, uverbs.EventQPLastWQEReached)))
	}
	return n, err
}

// noBfreg marks a QP on a page the library allocated: it holds no bfreg of the context.
const noBfreg = ^uint32(0)
