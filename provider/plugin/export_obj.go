package main

/*
#include "plugin.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

//export shiftGoAllocPD
func shiftGoAllocPD(sctx *C.struct_shift_context, spd *C.struct_shift_pd) (ret C.int) {
	defer guard("alloc_pd", &ret)
	c := valueOf[*devctx](sctx._go)
	p, err := c.v.AllocPD()
	if err != nil {
		return fail("alloc_pd "+c.name, err)
	}
	spd._go = handleOf(&pd{ctx: c, v: p})
	return 0
}

//export shiftGoDeallocPD
func shiftGoDeallocPD(spd *C.struct_shift_pd) (ret C.int) {
	defer guard("dealloc_pd", &ret)
	p := valueOf[*pd](spd._go)
	if err := p.v.Dealloc(); err != nil {
		return fail("dealloc_pd", err)
	}
	release(spd._go)
	return 0
}

//export shiftGoRegMR
func shiftGoRegMR(spd *C.struct_shift_pd, smr *C.struct_shift_mr, addr unsafe.Pointer, length C.size_t, iova C.uint64_t, access C.int) (ret C.int) {
	defer guard("reg_mr", &ret)
	p := valueOf[*pd](spd._go)
	if addr == nil || length == 0 {
		return C.int(unix.EINVAL)
	}
	// The application's memory, outside the Go heap: the MR refers to it in place.
	b := unsafe.Slice((*byte)(addr), int(length))
	m, err := p.v.RegMRIOVA(b, uint64(iova), verbs.Access(access))
	if err != nil {
		return fail(fmt.Sprintf("reg_mr %p+%d on %s", addr, length, p.ctx.name), err)
	}
	smr.vmr.ibv_mr.lkey, smr.vmr.ibv_mr.rkey = C.uint32_t(m.LKey()), C.uint32_t(m.RKey())
	smr._go = handleOf(&mr{v: m})
	return 0
}

//export shiftGoDeregMR
func shiftGoDeregMR(smr *C.struct_shift_mr) (ret C.int) {
	defer guard("dereg_mr", &ret)
	m := valueOf[*mr](smr._go)
	if err := m.v.Dereg(); err != nil {
		return fail("dereg_mr", err)
	}
	release(smr._go)
	return 0
}

//export shiftGoCreateCompChannel
func shiftGoCreateCompChannel(sctx *C.struct_shift_context, sch *C.struct_shift_comp_channel) (ret C.int) {
	defer guard("create_comp_channel", &ret)
	c := valueOf[*devctx](sctx._go)
	ch, err := c.v.CreateCompChannel()
	if err != nil {
		return fail("create_comp_channel "+c.name, err)
	}
	// libibverbs' ibv_get_cq_event reads the descriptor without polling first and expects
	// the read to wait, as on a kernel channel; the Go API's channels are non-blocking.
	if err := unix.SetNonblock(ch.Fd(), false); err != nil {
		ch.Close()
		return fail("create_comp_channel "+c.name+": clear O_NONBLOCK", err)
	}
	sch.ch.fd = C.int(ch.Fd())
	sch._go = handleOf(&channel{ctx: c, v: ch})
	pluginChannels.Store(uintptr(unsafe.Pointer(sch)), true)
	return 0
}

//export shiftGoDestroyCompChannel
func shiftGoDestroyCompChannel(sch *C.struct_shift_comp_channel) (ret C.int) {
	defer guard("destroy_comp_channel", &ret)
	ch := valueOf[*channel](sch._go)
	if err := ch.v.Close(); err != nil {
		return fail("destroy_comp_channel", err)
	}
	pluginChannels.Delete(uintptr(unsafe.Pointer(sch)))
	release(sch._go)
	return 0
}

// pluginChannels are the C channels the plugin made (struct shift_comp_channel), by address.
var pluginChannels sync.Map

// compChannel is the Go channel behind a C one: the plugin's own (created through the
// preload object), or, on real hardware in plain mode, libibverbs' kernel channel, wrapped.
func (c *devctx) compChannel(ich *C.struct_ibv_comp_channel) (verbs.CompChannel, error) {
	if ich == nil {
		return nil, nil
	}
	if _, ok := pluginChannels.Load(uintptr(unsafe.Pointer(ich))); ok {
		return valueOf[*channel]((*C.struct_shift_comp_channel)(unsafe.Pointer(ich))._go).v, nil
	}
	if c.emu || c.fo != nil {
		// A channel libibverbs made on the command fd: emulated devices have no kernel to
		// make one, and SHIFT must be able to raise events from the backup NIC on it.
		return nil, fmt.Errorf("completion channel not made by libmlx5-shift: load libmlx5-shift-preload.so (LD_PRELOAD) so that channels of %s are: %w", c.name, verbs.ErrNotSupported)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.imported == nil {
		c.imported = map[*C.struct_ibv_comp_channel]verbs.CompChannel{}
	}
	if ch := c.imported[ich]; ch != nil {
		return ch, nil
	}
	ch := c.prov.ImportCompChannel(int(ich.fd))
	c.imported[ich] = ch
	return ch, nil
}

//export shiftGoCreateCQ
func shiftGoCreateCQ(sctx *C.struct_shift_context, scq *C.struct_shift_cq, cqe C.int, ich *C.struct_ibv_comp_channel, vector C.int, size *C.int) (ret C.int) {
	defer guard("create_cq", &ret)
	c := valueOf[*devctx](sctx._go)
	ch, err := c.compChannel(ich)
	if err != nil {
		return failLoud("create_cq "+c.name, err)
	}
	v, err := c.v.CreateCQ(verbs.CQInitAttr{CQE: int(cqe), Channel: ch, CompVector: uint32(vector),
		Handle: uint64(uintptr(unsafe.Pointer(&scq.vcq))) /* the ibv_cq libibverbs hands back */})
	if err != nil {
		return fail("create_cq "+c.name, err)
	}
	if err := fastCQ(sctx, scq, v); err != nil {
		v.Destroy()
		return fail("create_cq "+c.name, err)
	}
	peekCQ(scq, v)
	*size = C.int(v.Size())
	q := &cq{ctx: c, v: v, wcs: make([]verbs.WC, scq.nwc)}
	if cfg, _ := loadConfig(); cfg.cData {
		sharePoll(scq, q)
	}
	scq._go = handleOf(q)
	return 0
}

//export shiftGoDestroyCQ
func shiftGoDestroyCQ(scq *C.struct_shift_cq) (ret C.int) {
	defer guard("destroy_cq", &ret)
	q := valueOf[*cq](scq._go)
	if err := q.v.Destroy(); err != nil {
		return fail("destroy_cq", err)
	}
	unsharePoll(scq, q)
	release(scq._go)
	return 0
}

//export shiftGoArmCQ
func shiftGoArmCQ(scq *C.struct_shift_cq, solicited C.int) (ret C.int) {
	defer guard("req_notify_cq", &ret)
	q := valueOf[*cq](scq._go)
	if err := q.v.Arm(solicited != 0); err != nil {
		return fail("req_notify_cq", err)
	}
	return 0
}

//export shiftGoCQEvent
func shiftGoCQEvent(scq *C.struct_shift_cq) {
	var ret C.int
	defer guard("cq_event", &ret)
	if p, ok := valueOf[*cq](scq._go).v.(*provider.CQ); ok {
		p.EventReceived() // SHIFT's channel needs nothing: it counts its own events
	}
}

//export shiftGoIsPluginChannel
func shiftGoIsPluginChannel(sch *C.struct_shift_comp_channel) C.int {
	if _, ok := pluginChannels.Load(uintptr(unsafe.Pointer(sch))); ok {
		return 1
	}
	return 0
}
