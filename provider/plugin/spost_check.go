package main

/*
#include <stdlib.h>
#include "plugin.h"
#include "check.h"

static struct ibv_send_wr *check_wr_at(struct ibv_send_wr *a, int i) { return &a[i]; }
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// SHIFT mode's C poster reached from Go, for spost_test.go (cgo is not allowed in test
// files): a struct shift_spost over a provider QP's shared send queue and a gate the test
// owns, and a list of ibv_send_wr in C memory.

const checkMaxWRs = 8

// checkSpost is a C poster of one provider QP.
type checkSpost struct {
	s    *C.struct_shift_spost
	wrs  *C.struct_ibv_send_wr
	sges *C.struct_ibv_sge
	pin  runtime.Pinner
}

// newCheckSpost shares q's send queue with a C poster behind gate; it reports false when the
// QP's register is shared with other QPs (such QPs are not given to the C poster).
func newCheckSpost(q *provider.QP, gate failover.SendGateShare) (*checkSpost, bool) {
	c := &checkSpost{}
	ss, ok := q.ShareSend(&c.pin)
	if !ok || ss.BF.NeedLock {
		c.pin.Unpin()
		return nil, false
	}
	c.pin.Pin(gate.State)
	c.pin.Pin(gate.Busy)
	c.pin.Pin(gate.Injection)
	c.pin.Pin(gate.Injection.Load())
	c.s = (*C.struct_shift_spost)(C.calloc(1, C.sizeof_struct_shift_spost))
	c.wrs = (*C.struct_ibv_send_wr)(C.calloc(checkMaxWRs, C.sizeof_struct_ibv_send_wr))
	c.sges = (*C.struct_ibv_sge)(C.calloc(checkMaxWRs*checkMaxSGE, C.sizeof_struct_ibv_sge))
	fillSpost(c.s, &ss, gate)
	return c, true
}

func (c *checkSpost) free() {
	C.free(unsafe.Pointer(c.s))
	C.free(unsafe.Pointer(c.wrs))
	C.free(unsafe.Pointer(c.sges))
	c.pin.Unpin()
}

// post builds wrs as an ibv_send_wr list and runs shift_spost_send: true when C posted it,
// false when it left the list to Go. SGE addresses must be memory C may read.
func (c *checkSpost) post(wrs []verbs.SendWR) bool {
	if len(wrs) > checkMaxWRs {
		panic("checkSpost.post: more than checkMaxWRs WRs")
	}
	sg := unsafe.Slice(c.sges, checkMaxWRs*checkMaxSGE)
	for i := range wrs {
		w := &wrs[i]
		if len(w.SGL) > checkMaxSGE {
			panic("checkSpost.post: more than checkMaxSGE SGEs")
		}
		cw := C.check_wr_at(c.wrs, C.int(i))
		*cw = C.struct_ibv_send_wr{wr_id: C.uint64_t(w.WRID), opcode: uint32(w.Opcode), send_flags: C.uint(w.Flags),
			num_sge: C.int(len(w.SGL)), sg_list: &sg[i*checkMaxSGE]}
		if i+1 < len(wrs) {
			cw.next = C.check_wr_at(c.wrs, C.int(i+1))
		}
		C.check_set_imm(cw, C.uint32_t(w.Imm))
		for k, g := range w.SGL {
			sg[i*checkMaxSGE+k] = C.struct_ibv_sge{addr: C.uint64_t(g.Addr), length: C.uint32_t(g.Length), lkey: C.uint32_t(g.LKey)}
		}
		switch w.Opcode {
		case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAdd:
			C.check_set_atomic(cw, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), C.uint64_t(w.CompareAdd), C.uint64_t(w.Swap))
		default:
			C.check_set_rdma(cw, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey))
		}
	}
	return C.shift_spost_send(c.s, c.wrs) == 0
}

// checkSrecv is a C receive poster of one provider QP.
type checkSrecv struct {
	s    *C.struct_shift_srecv
	wrs  *C.struct_ibv_recv_wr
	sges *C.struct_ibv_sge
	pin  runtime.Pinner
}

// newCheckSrecv shares q's receive queue with a C poster behind gate and its log.
func newCheckSrecv(q *provider.QP, gate failover.RecvGateShare) *checkSrecv {
	c := &checkSrecv{}
	rs, ok := q.ShareRecv(&c.pin)
	if !ok {
		panic("newCheckSrecv: a QP without a receive queue")
	}
	c.pin.Pin(gate.State)
	c.pin.Pin(gate.Busy)
	c.pin.Pin(&gate.Log[0])
	c.pin.Pin(&gate.SGE[0])
	c.pin.Pin(gate.Posted)
	c.s = (*C.struct_shift_srecv)(C.calloc(1, C.sizeof_struct_shift_srecv))
	c.wrs = (*C.struct_ibv_recv_wr)(C.calloc(checkMaxWRs, C.sizeof_struct_ibv_recv_wr))
	c.sges = (*C.struct_ibv_sge)(C.calloc(checkMaxWRs*checkMaxSGE, C.sizeof_struct_ibv_sge))
	fillSrecv(c.s, &rs, gate)
	return c
}

func (c *checkSrecv) free() {
	C.free(unsafe.Pointer(c.s))
	C.free(unsafe.Pointer(c.wrs))
	C.free(unsafe.Pointer(c.sges))
	c.pin.Unpin()
}

// post builds wrs as an ibv_recv_wr list and runs shift_srecv_post: true when C posted it.
func (c *checkSrecv) post(wrs []verbs.RecvWR) bool {
	if len(wrs) > checkMaxWRs {
		panic("checkSrecv.post: more than checkMaxWRs WRs")
	}
	ws := unsafe.Slice(c.wrs, checkMaxWRs)
	sg := unsafe.Slice(c.sges, checkMaxWRs*checkMaxSGE)
	for i := range wrs {
		if len(wrs[i].SGL) > checkMaxSGE {
			panic("checkSrecv.post: more than checkMaxSGE SGEs")
		}
		ws[i] = C.struct_ibv_recv_wr{wr_id: C.uint64_t(wrs[i].WRID), num_sge: C.int(len(wrs[i].SGL)), sg_list: &sg[i*checkMaxSGE]}
		if i+1 < len(wrs) {
			ws[i].next = &ws[i+1]
		}
		for k, g := range wrs[i].SGL {
			sg[i*checkMaxSGE+k] = C.struct_ibv_sge{addr: C.uint64_t(g.Addr), length: C.uint32_t(g.Length), lkey: C.uint32_t(g.LKey)}
		}
	}
	return C.shift_srecv_post(c.s, c.wrs) == 0
}
