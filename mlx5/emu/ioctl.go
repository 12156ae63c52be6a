package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/uverbs"
)

// Ioctl decodes one RDMA_VERBS_IOCTL call as ib_uverbs_ioctl does: the header, the
// method's attribute schema (unknown mandatory attributes, lengths, duplicates), object
// handles resolved before the handler runs, then the handler; outputs are copied through the
// attributes' pointers and flagged valid.
func (f *File) Ioctl(buf []byte) error {
	if f.dev.kernel == KernelNoIoctl {
		return fmt.Errorf("ioctl on a kernel without RDMA_VERBS_IOCTL: %w", unix.ENOTTY)
	}
	r, err := uverbs.ParseIoctl(buf)
	if err != nil {
		return fmt.Errorf("ioctl: %w", err)
	}
	if err := f.dev.kernel.ioctlOffered(r.Hdr.Object_id, r.Hdr.Method_id); err != nil {
		return fmt.Errorf("ioctl object %d method %d on a %s kernel: %w", r.Hdr.Object_id, r.Hdr.Method_id, f.dev.kernel, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errIfClosed(); err != nil {
		return err
	}
	if r.Hdr.Driver_id != uverbs.DriverIDMLX5 {
		// The header names the driver the library was built for; the kernel refuses a
		// mismatch (measured EINVAL on Linux 6.1).
		return fmt.Errorf("ioctl: driver id %d, device is mlx5: %w", r.Hdr.Driver_id, unix.EINVAL)
	}
	m, ok := ioctlMethods[[2]uint16{r.Hdr.Object_id, r.Hdr.Method_id}]
	if !ok {
		return fmt.Errorf("ioctl object %d method %d: %w", r.Hdr.Object_id, r.Hdr.Method_id, unix.EPROTONOSUPPORT)
	}
	if err := r.Check(m.specs); err != nil {
		return fmt.Errorf("ioctl %s: %w", m.name, err)
	}
	// get_context makes the context; invoke_write leaves the check to the write command it
	// carries (as the write path does).
	if m.name != "get_context" && m.name != "invoke_write" {
		if err := f.needContext(m.name); err != nil {
			return err
		}
	}
	if err := traced(m.run(f, r)); err != nil {
		if errors.Is(err, uverbs.ErrAttrMissing) {
			return fmt.Errorf("ioctl %s: %w: %w", m.name, err, unix.EINVAL)
		}
		return fmt.Errorf("ioctl %s: %w", m.name, err)
	}
	return nil
}

type ioctlMethod struct {
	name  string
	specs []uverbs.AttrSpec
	run   func(f *File, r *uverbs.IoctlRequest) error
}

var (
	uhwIn  = uverbs.AttrSpec{ID: uverbs.AttrUHWIn, Kind: uverbs.AttrPtrIn}
	uhwOut = uverbs.AttrSpec{ID: uverbs.AttrUHWOut, Kind: uverbs.AttrPtrOut}
)

// const8 is UVERBS_ATTR_CONST_IN: a u64-sized inline attribute.
func const8(id uint16, mandatory bool) uverbs.AttrSpec {
	return uverbs.AttrSpec{ID: id, Kind: uverbs.AttrConstIn, Mandatory: mandatory, MinLen: 8, MaxLen: 8}
}

func ptrIn(id uint16, mandatory bool, n int) uverbs.AttrSpec {
	return uverbs.AttrSpec{ID: id, Kind: uverbs.AttrPtrIn, Mandatory: mandatory, MinLen: n, MaxLen: n}
}

func ptrOut(id uint16, mandatory bool, minLen int) uverbs.AttrSpec {
	return uverbs.AttrSpec{ID: id, Kind: uverbs.AttrPtrOut, Mandatory: mandatory, MinLen: minLen}
}

func idr(id uint16, mandatory bool) uverbs.AttrSpec {
	return uverbs.AttrSpec{ID: id, Kind: uverbs.AttrIDR, Mandatory: mandatory}
}

func fdAttr(id uint16, mandatory bool) uverbs.AttrSpec {
	return uverbs.AttrSpec{ID: id, Kind: uverbs.AttrFD, Mandatory: mandatory}
}

var ioctlMethods map[[2]uint16]ioctlMethod

func init() {
	ioctlMethods = map[[2]uint16]ioctlMethod{
		{uverbs.ObjectDevice, uverbs.MethodInvokeWrite}: {"invoke_write", []uverbs.AttrSpec{
			const8(uverbs.AttrWriteCmd, true),
			{ID: uverbs.AttrCoreIn, Kind: uverbs.AttrPtrIn},
			{ID: uverbs.AttrCoreOut, Kind: uverbs.AttrPtrOut},
			uhwIn, uhwOut}, (*File).iInvokeWrite},
		{uverbs.ObjectDevice, uverbs.MethodGetContext}: {"get_context", []uverbs.AttrSpec{
			ptrOut(uverbs.AttrGetContextNumCompVectors, false, 4),
			ptrOut(uverbs.AttrGetContextCoreSupport, false, 8), uhwIn, uhwOut}, (*File).iGetContext},
		{uverbs.ObjectDevice, uverbs.MethodQueryPort}: {"query_port", []uverbs.AttrSpec{
			const8(uverbs.AttrQueryPortPortNum, true),
			ptrOut(uverbs.AttrQueryPortResp, true, sizeOf[uverbs.QueryPortResp]())}, (*File).iQueryPort},
		{uverbs.ObjectDevice, uverbs.MethodQueryGIDTable}: {"query_gid_table", []uverbs.AttrSpec{
			const8(uverbs.AttrQueryGIDTableEntrySize, true),
			flagsAttr(uverbs.AttrQueryGIDTableFlags),
			ptrOut(uverbs.AttrQueryGIDTableRespEntries, true, 0),
			ptrOut(uverbs.AttrQueryGIDTableRespNumEntries, true, 8)}, (*File).iQueryGIDTable},
		{uverbs.ObjectDevice, uverbs.MethodQueryGIDEntry}: {"query_gid_entry", []uverbs.AttrSpec{
			const8(uverbs.AttrQueryGIDEntryPort, true),
			const8(uverbs.AttrQueryGIDEntryGIDIndex, true),
			flagsAttr(uverbs.AttrQueryGIDEntryFlags),
			ptrOut(uverbs.AttrQueryGIDEntryRespEntry, true, sizeOf[uverbs.GIDEntry]())}, (*File).iQueryGIDEntry},
		{mlx5.ObjectUAR, mlx5.MethodUARObjAlloc}: {"uar_obj_alloc", []uverbs.AttrSpec{
			idr(mlx5.AttrUARObjAllocHandle, true),
			{ID: mlx5.AttrUARObjAllocType, Kind: uverbs.AttrConstIn, Mandatory: true, MinLen: 4, MaxLen: 8},
			ptrOut(mlx5.AttrUARObjAllocMmapOffset, true, 8),
			ptrOut(mlx5.AttrUARObjAllocMmapLength, true, 4),
			ptrOut(mlx5.AttrUARObjAllocPageID, true, 4)}, (*File).iUARAlloc},
		{mlx5.ObjectUAR, mlx5.MethodUARObjDestroy}: {"uar_obj_destroy", []uverbs.AttrSpec{
			idr(mlx5.AttrUARObjDestroyHandle, true)}, (*File).iUARDestroy},
		{uverbs.ObjectPD, uverbs.MethodPDDestroy}: {"dealloc_pd", []uverbs.AttrSpec{
			idr(uverbs.AttrDestroyPDHandle, true)}, (*File).iDeallocPD},
		{uverbs.ObjectMR, uverbs.MethodMRDestroy}: {"dereg_mr", []uverbs.AttrSpec{
			idr(uverbs.AttrDestroyMRHandle, true)}, (*File).iDeregMR},
		{uverbs.ObjectCQ, uverbs.MethodCQCreate}: {"create_cq", []uverbs.AttrSpec{
			idr(uverbs.AttrCreateCQHandle, true),
			ptrIn(uverbs.AttrCreateCQCQE, true, 4),
			ptrIn(uverbs.AttrCreateCQUserHandle, true, 8),
			fdAttr(uverbs.AttrCreateCQCompChannel, false),
			ptrIn(uverbs.AttrCreateCQCompVector, true, 4),
			flagsAttr(uverbs.AttrCreateCQFlags),
			ptrOut(uverbs.AttrCreateCQRespCQE, true, 4),
			fdAttr(uverbs.AttrCreateCQEventFD, false), uhwIn, uhwOut}, (*File).iCreateCQ},
		{uverbs.ObjectCQ, uverbs.MethodCQDestroy}: {"destroy_cq", []uverbs.AttrSpec{
			idr(uverbs.AttrDestroyCQHandle, true),
			ptrOut(uverbs.AttrDestroyCQResp, true, sizeOf[uverbs.DestroyCQResp]())}, (*File).iDestroyCQ},
		{uverbs.ObjectQP, uverbs.MethodQPCreate}: {"create_qp", []uverbs.AttrSpec{
			idr(uverbs.AttrCreateQPHandle, true),
			idr(uverbs.AttrCreateQPXRCDHandle, false),
			idr(uverbs.AttrCreateQPPDHandle, false),
			idr(uverbs.AttrCreateQPSRQHandle, false),
			idr(uverbs.AttrCreateQPSendCQHandle, false),
			idr(uverbs.AttrCreateQPRecvCQHandle, false),
			idr(uverbs.AttrCreateQPIndTableHandle, false),
			ptrIn(uverbs.AttrCreateQPUserHandle, true, 8),
			ptrIn(uverbs.AttrCreateQPCap, true, sizeOf[uverbs.QPCap]()),
			const8(uverbs.AttrCreateQPType, true),
			flagsAttr(uverbs.AttrCreateQPFlags),
			ptrIn(uverbs.AttrCreateQPSourceQPN, false, 4),
			fdAttr(uverbs.AttrCreateQPEventFD, false),
			ptrOut(uverbs.AttrCreateQPRespCap, true, sizeOf[uverbs.QPCap]()),
			ptrOut(uverbs.AttrCreateQPRespQPNum, true, 4), uhwIn, uhwOut}, (*File).iCreateQP},
		{uverbs.ObjectQP, uverbs.MethodQPDestroy}: {"destroy_qp", []uverbs.AttrSpec{
			idr(uverbs.AttrDestroyQPHandle, true),
			ptrOut(uverbs.AttrDestroyQPResp, true, 4)}, (*File).iDestroyQP},
		{uverbs.ObjectAsyncEvent, uverbs.MethodAsyncEventAlloc}: {"async_event_alloc", []uverbs.AttrSpec{
			fdAttr(uverbs.AttrAsyncEventAllocFDHandle, true)}, (*File).iAsyncEventAlloc},
	}
}

func u32(b []byte) uint32 {
	var f [4]byte
	copy(f[:], b)
	return binary.NativeEndian.Uint32(f[:])
}

func u64b(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
func u32b(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func (f *File) iGetContext(r *uverbs.IoctlRequest) error {
	in, outLen, err := r.Driver()
	if err != nil {
		return err
	}
	resp, err := f.getContext(in, outLen)
	if err != nil {
		return err
	}
	if r.Has(uverbs.AttrGetContextNumCompVectors) {
		if err := r.Out(uverbs.AttrGetContextNumCompVectors, u32b(f.dev.caps.CompVectors)); err != nil {
			f.undoContext()
			return err
		}
	}
	if r.Has(uverbs.AttrGetContextCoreSupport) {
		if err := r.Out(uverbs.AttrGetContextCoreSupport, u64b(uverbs.CoreSupportOptionalMRAccess)); err != nil {
			f.undoContext()
			return err
		}
	}
	if err := r.DriverOut(resp); err != nil {
		f.undoContext()
		return err
	}
	return nil
}

func (f *File) iQueryPort(r *uverbs.IoctlRequest) error {
	num, err := r.Const(uverbs.AttrQueryPortPortNum)
	if err != nil {
		return err
	}
	if num > 0xff {
		return fmt.Errorf("port %d: %w", num, unix.EINVAL)
	}
	p, err := f.dev.queryPort(int(num))
	if err != nil {
		return err
	}
	ex := uverbs.QueryPortRespEx{Legacy_resp: p}
	return r.OutZero(uverbs.AttrQueryPortResp, encode(&ex))
}

func netdevIndex(name string) uint32 {
	if ifi, err := net.InterfaceByName(name); err == nil {
		return uint32(ifi.Index)
	}
	return 0
}

func (f *File) iQueryGIDTable(r *uverbs.IoctlRequest) error {
	esz, err := r.Const(uverbs.AttrQueryGIDTableEntrySize)
	if err != nil {
		return err
	}
	if r.Has(uverbs.AttrQueryGIDTableFlags) {
		if fl, _ := r.Const(uverbs.AttrQueryGIDTableFlags); fl != 0 {
			return fmt.Errorf("flags %#x: %w", fl, unix.EINVAL)
		}
	}
	// ib_uverbs_handler_UVERBS_METHOD_QUERY_GID_TABLE: the caller's entry size must cover
	// the kernel's struct (a larger one is padded with zeros).
	if esz < uint64(sizeOf[uverbs.GIDEntry]()) || esz > 4096 {
		return fmt.Errorf("entry size %d: %w", esz, unix.EINVAL)
	}
	capacity, err := r.OutLen(uverbs.AttrQueryGIDTableRespEntries)
	if err != nil {
		return err
	}
	entries := f.dev.gidEntries(netdevIndex)
	if uint64(capacity)/esz < uint64(len(entries)) {
		return fmt.Errorf("room for %d entries, %d populated: %w", uint64(capacity)/esz, len(entries), unix.EINVAL)
	}
	out := make([]byte, uint64(len(entries))*esz)
	for i := range entries {
		copy(out[uint64(i)*esz:], encode(&entries[i]))
	}
	if err := r.Out(uverbs.AttrQueryGIDTableRespEntries, out); err != nil {
		return err
	}
	return r.Out(uverbs.AttrQueryGIDTableRespNumEntries, u64b(uint64(len(entries))))
}

// iQueryGIDEntry is UVERBS_METHOD_QUERY_GID_ENTRY: an invalid port is EINVAL, an index
// outside the table or an empty entry ENODATA (rdma_get_gid_attr).
func (f *File) iQueryGIDEntry(r *uverbs.IoctlRequest) error {
	port, err := r.Const(uverbs.AttrQueryGIDEntryPort)
	if err != nil {
		return err
	}
	idx, err := r.Const(uverbs.AttrQueryGIDEntryGIDIndex)
	if err != nil {
		return err
	}
	if r.Has(uverbs.AttrQueryGIDEntryFlags) {
		if fl, _ := r.Const(uverbs.AttrQueryGIDEntryFlags); fl != 0 {
			return fmt.Errorf("flags %#x: %w", fl, unix.EINVAL)
		}
	}
	if _, ok := f.dev.port(int(port)); !ok || port > 0xff {
		return fmt.Errorf("port %d: %w", port, unix.EINVAL)
	}
	if idx != 0 {
		return fmt.Errorf("port %d gid index %d: no such entry: %w", port, idx, unix.ENODATA)
	}
	for _, e := range f.dev.gidEntries(netdevIndex) {
		if e.Port_num == uint32(port) {
			return r.OutZero(uverbs.AttrQueryGIDEntryRespEntry, encode(&e))
		}
	}
	return fmt.Errorf("port %d: %w", port, unix.ENODATA)
}

func (f *File) iDeallocPD(r *uverbs.IoctlRequest) error {
	h, err := r.Obj(uverbs.AttrDestroyPDHandle)
	if err != nil {
		return err
	}
	return f.deallocPDLocked(h)
}

func (f *File) iDeregMR(r *uverbs.IoctlRequest) error {
	h, err := r.Obj(uverbs.AttrDestroyMRHandle)
	if err != nil {
		return err
	}
	return f.deregMRLocked(h)
}

func (f *File) iCreateCQ(r *uverbs.IoctlRequest) error {
	cqeB, err := r.In(uverbs.AttrCreateCQCQE)
	if err != nil {
		return err
	}
	uhB, err := r.In(uverbs.AttrCreateCQUserHandle)
	if err != nil {
		return err
	}
	vecB, err := r.In(uverbs.AttrCreateCQCompVector)
	if err != nil {
		return err
	}
	if r.Has(uverbs.AttrCreateCQFlags) {
		if fl, _ := r.Const(uverbs.AttrCreateCQFlags); fl != 0 {
			return fmt.Errorf("flags %#x: %w", fl, unix.EOPNOTSUPP)
		}
	}
	if r.Has(uverbs.AttrCreateCQEventFD) {
		if err := f.checkAsyncFd(r, uverbs.AttrCreateCQEventFD); err != nil {
			return err
		}
	}
	ch := int32(-1)
	if r.Has(uverbs.AttrCreateCQCompChannel) {
		fd, _ := r.FD(uverbs.AttrCreateCQCompChannel)
		ch = int32(fd)
	}
	in, _, err := r.Driver()
	if err != nil {
		return err
	}
	ud, err := mlx5.DecodeCreateCQ(in)
	if err != nil {
		return fmt.Errorf("driver data: %w", unix.EINVAL)
	}
	h, n, cqn, err := f.createCQ(binary.NativeEndian.Uint64(uhB), u32(cqeB), u32(vecB), ch, ud)
	if err != nil {
		return err
	}
	dr := mlx5.CreateCQResp{CQN: cqn}
	b := make([]byte, mlx5.CreateCQRespSize)
	dr.Put(b)
	if err = r.Out(uverbs.AttrCreateCQRespCQE, u32b(n)); err == nil {
		if err = r.DriverOut(b); err == nil {
			err = r.SetObj(uverbs.AttrCreateCQHandle, h)
		}
	}
	if err != nil {
		_, _, _ = f.destroyCQLocked(h)
	}
	return err
}

// checkAsyncFd resolves an FD attribute that must name an async event file of this context.
func (f *File) checkAsyncFd(r *uverbs.IoctlRequest, id uint16) error {
	fd, _ := r.FD(id)
	if q := f.async.Load(); q != nil && fd == q.userFd {
		return nil
	}
	for _, q := range f.asyncMore {
		if q.userFd == fd {
			return nil
		}
	}
	return fmt.Errorf("fd %d is not an event file of this context: %w", fd, unix.EINVAL)
}

func (f *File) iDestroyCQ(r *uverbs.IoctlRequest) error {
	h, err := r.Obj(uverbs.AttrDestroyCQHandle)
	if err != nil {
		return err
	}
	comp, async, err := f.destroyCQLocked(h)
	if err != nil {
		return err
	}
	resp := uverbs.DestroyCQResp{Comp_events_reported: comp, Async_events_reported: async}
	return r.Out(uverbs.AttrDestroyCQResp, encode(&resp))
}

func (f *File) iCreateQP(r *uverbs.IoctlRequest) error {
	typ, err := r.Const(uverbs.AttrCreateQPType)
	if err != nil {
		return err
	}
	if r.Has(uverbs.AttrCreateQPXRCDHandle) || r.Has(uverbs.AttrCreateQPIndTableHandle) || r.Has(uverbs.AttrCreateQPSourceQPN) {
		return fmt.Errorf("XRC, RSS and source QPN not emulated: %w", unix.EOPNOTSUPP)
	}
	// UVERBS_METHOD_QP_CREATE: an RC QP needs a PD and both CQs.
	if !r.Has(uverbs.AttrCreateQPPDHandle) || !r.Has(uverbs.AttrCreateQPSendCQHandle) || !r.Has(uverbs.AttrCreateQPRecvCQHandle) {
		return fmt.Errorf("PD and CQ handles required: %w", unix.EINVAL)
	}
	pd, _ := r.Obj(uverbs.AttrCreateQPPDHandle)
	scq, _ := r.Obj(uverbs.AttrCreateQPSendCQHandle)
	rcq, _ := r.Obj(uverbs.AttrCreateQPRecvCQHandle)
	// IDR inputs are looked up before the handler runs: a missing object is ENOENT, another
	// type EINVAL (rdma_lookup_get_uobject).
	for _, c := range []struct {
		t objType
		h uint32
	}{{objPD, pd}, {objCQ, scq}, {objCQ, rcq}} {
		if _, err := f.handles.get(c.t, c.h); err != nil {
			return err
		}
	}
	uhB, err := r.In(uverbs.AttrCreateQPUserHandle)
	if err != nil {
		return err
	}
	capB, err := r.In(uverbs.AttrCreateQPCap)
	if err != nil {
		return err
	}
	var flags uint64
	if r.Has(uverbs.AttrCreateQPFlags) {
		flags, _ = r.Const(uverbs.AttrCreateQPFlags)
	}
	if r.Has(uverbs.AttrCreateQPEventFD) {
		if err := f.checkAsyncFd(r, uverbs.AttrCreateQPEventFD); err != nil {
			return err
		}
	}
	qc := decode[uverbs.QPCap](capB)
	in, _, err := r.Driver()
	if err != nil {
		return err
	}
	ud, err := mlx5.DecodeCreateQP(in)
	if err != nil {
		return fmt.Errorf("driver data: %w", unix.EINVAL)
	}
	if typ > 0xff || flags > 0xffffffff {
		return fmt.Errorf("type %d flags %#x: %w", typ, flags, unix.EINVAL)
	}
	qp, dresp, err := f.createQP(createQPReq{
		userHandle: binary.NativeEndian.Uint64(uhB), pd: pd, sendCQ: scq, recvCQ: rcq,
		isSRQ: r.Has(uverbs.AttrCreateQPSRQHandle), qpType: uint8(typ), createFlags: uint32(flags),
		sqSigAll: flags&uverbs.QPCreateSQSigAll != 0,
		cap:      qpCap{qc.Send_wr, qc.Recv_wr, qc.Send_sge, qc.Recv_sge, qc.Inline_data},
		ud:       ud,
	})
	if err != nil {
		return err
	}
	rc := uverbs.QPCap{Send_wr: qp.cap.maxSendWR, Recv_wr: qp.cap.maxRecvWR, Send_sge: qp.cap.maxSendSGE,
		Recv_sge: qp.cap.maxRecvSGE, Inline_data: qp.cap.maxInline}
	b := make([]byte, mlx5.CreateQPRespSize)
	dresp.Put(b)
	if err = r.Out(uverbs.AttrCreateQPRespCap, encode(&rc)); err == nil {
		if err = r.Out(uverbs.AttrCreateQPRespQPNum, u32b(qp.qpn)); err == nil {
			if err = r.DriverOut(b); err == nil {
				err = r.SetObj(uverbs.AttrCreateQPHandle, qp.handle)
			}
		}
	}
	if err != nil {
		_, _ = f.destroyQPLocked(qp.handle)
	}
	return err
}

func (f *File) iDestroyQP(r *uverbs.IoctlRequest) error {
	h, err := r.Obj(uverbs.AttrDestroyQPHandle)
	if err != nil {
		return err
	}
	n, err := f.destroyQPLocked(h)
	if err != nil {
		return err
	}
	return r.Out(uverbs.AttrDestroyQPResp, u32b(n))
}

func (f *File) iAsyncEventAlloc(r *uverbs.IoctlRequest) error {
	q, err := f.allocAsyncFd()
	if err != nil {
		return err
	}
	return r.SetFD(uverbs.AttrAsyncEventAllocFDHandle, q.userFd)
}

// flagsAttr is UVERBS_ATTR_FLAGS_IN: a u32 or u64 inline bit mask (uverbs_get_flags32/64).
func flagsAttr(id uint16) uverbs.AttrSpec {
	return uverbs.AttrSpec{ID: id, Kind: uverbs.AttrConstIn, MinLen: 4, MaxLen: 8}
}
