package main

/*
#include "plugin.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider/verbs"
)

// cqOf is the Go CQ behind an ibv_cq the plugin created (vcq is first in shift_cq).
func cqOf(c *C.struct_ibv_cq) (*cq, bool) {
	if c == nil {
		return nil, false
	}
	scq := (*C.struct_shift_cq)(unsafe.Pointer(c))
	return valueOf[*cq](scq._go), true
}

//export shiftGoCreateQP
func shiftGoCreateQP(spd *C.struct_shift_pd, sqp *C.struct_shift_qp, a *C.struct_ibv_qp_init_attr, qpn *C.uint32_t) (ret C.int) {
	defer guard("create_qp", &ret)
	p := valueOf[*pd](spd._go)
	c := p.ctx
	scq, ok1 := cqOf(a.send_cq)
	rcq, ok2 := cqOf(a.recv_cq)
	if !ok1 || !ok2 || scq.ctx != c || rcq.ctx != c {
		return C.int(unix.EINVAL)
	}
	// An emulated device binds its address at its first QP (emuhost): a device another
	// process carries traffic on fails the create, loudly.
	v, err := p.v.CreateQP(verbs.QPInitAttr{SendCQ: scq.v, RecvCQ: rcq.v, Cap: capFromC(&a.cap), SigAll: a.sq_sig_all != 0,
		Handle: uint64(uintptr(unsafe.Pointer(&sqp.vqp))) /* the ibv_qp async events name */})
	if err != nil {
		if c.emu {
			return failLoud("create_qp "+c.name, err)
		}
		return fail("create_qp "+c.name, err)
	}
	if err := fastQP(c.sctx, sqp, (*C.struct_shift_cq)(unsafe.Pointer(a.send_cq)), (*C.struct_shift_cq)(unsafe.Pointer(a.recv_cq)), v); err != nil {
		v.Destroy()
		return fail("create_qp "+c.name, err)
	}
	cp := v.Cap()
	capToC(cp, &a.cap)
	*qpn = C.uint32_t(v.QPN())
	q := &qp{ctx: c, v: v, cap: cp,
		swrs: make([]verbs.SendWR, max(cp.MaxSendWR, 1)), rwrs: make([]verbs.RecvWR, max(cp.MaxRecvWR, 1))}
	if cfg, _ := loadConfig(); cfg.cData {
		sharePost(sqp, q)
	}
	sqp._go = handleOf(q)
	c.qps.Store(v.QPN(), q)
	return 0
}

//export shiftGoModifyQP
func shiftGoModifyQP(sqp *C.struct_shift_qp, a *C.struct_ibv_qp_attr, mask C.int) (ret C.int) {
	defer guard("modify_qp", &ret)
	q := valueOf[*qp](sqp._go)
	attr := qpAttrFromC(a)
	if err := q.v.Modify(&attr, verbs.QPAttrMask(mask)); err != nil {
		return fail(fmt.Sprintf("modify_qp %#x", q.v.QPN()), err)
	}
	return 0
}

//export shiftGoQueryQP
func shiftGoQueryQP(sqp *C.struct_shift_qp, a *C.struct_ibv_qp_attr, mask C.int) (ret C.int) {
	defer guard("query_qp", &ret)
	q := valueOf[*qp](sqp._go)
	attr, err := q.v.Query(verbs.QPAttrMask(mask))
	if err != nil {
		return fail(fmt.Sprintf("query_qp %#x", q.v.QPN()), err)
	}
	// ibv_query_qp reports the caps the QP was created with (the kernel answers them on
	// real devices; the provider rounded them up).
	attr.Cap = q.cap
	qpAttrToC(&attr, a)
	return 0
}

//export shiftGoDestroyQP
func shiftGoDestroyQP(sqp *C.struct_shift_qp) (ret C.int) {
	defer guard("destroy_qp", &ret)
	q := valueOf[*qp](sqp._go)
	if c, _ := loadConfig(); c.debug {
		if fq, ok := q.v.(*failover.QP); ok {
			fmt.Fprintf(os.Stderr, "libmlx5-shift: QP %#x on %s: send %v, receive %v, error %v; %d error completions polled\n",
				fq.QPN(), q.ctx.name, fq.SendState(), fq.RecvState(), fq.Err(), q.errWCs.Load())
		}
	}
	if err := q.v.Destroy(); err != nil {
		return fail(fmt.Sprintf("destroy_qp %#x", q.v.QPN()), err)
	}
	unsharePost(sqp, q)
	q.ctx.qps.Delete(q.v.QPN())
	release(sqp._go)
	return 0
}

// sgl is an ibv_sge array in place: struct ibv_sge and verbs.SGE have one layout.
func sgl(p *C.struct_ibv_sge, n C.uint32_t) []verbs.SGE {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*verbs.SGE)(unsafe.Pointer(p)), int(n))
}

//export shiftGoPostSend
func shiftGoPostSend(sqp *C.struct_shift_qp, n C.uint32_t) (ret C.int) {
	defer guard("post_send", &ret)
	q := valueOf[*qp](sqp._go)
	recs := unsafe.Slice(sqp.swr, int(n))
	wrs := q.swrs[:n]
	for i := range recs {
		r := &recs[i]
		wrs[i] = verbs.SendWR{WRID: uint64(r.wr_id), Opcode: verbs.WROpcode(r.opcode), Flags: verbs.SendFlags(r.send_flags),
			SGL: sgl(r.sg_list, r.num_sge), Imm: uint32(r.imm), RemoteAddr: uint64(r.remote_addr), RKey: uint32(r.rkey),
			CompareAdd: uint64(r.compare_add), Swap: uint64(r.swap)}
	}
	err := q.v.PostSend(wrs)
	clear(wrs) // no pointers into the application's SGE arrays kept past the call
	if err != nil {
		return fail("post_send", err)
	}
	return 0
}

//export shiftGoPostRecv
func shiftGoPostRecv(sqp *C.struct_shift_qp, n C.uint32_t) (ret C.int) {
	defer guard("post_recv", &ret)
	q := valueOf[*qp](sqp._go)
	recs := unsafe.Slice(sqp.rwr, int(n))
	wrs := q.rwrs[:n]
	for i := range recs {
		wrs[i] = verbs.RecvWR{WRID: uint64(recs[i].wr_id), SGL: sgl(recs[i].sg_list, recs[i].num_sge)}
	}
	err := q.v.PostRecv(wrs)
	clear(wrs)
	if err != nil {
		return fail("post_recv", err)
	}
	return 0
}

//export shiftGoPollCQ
func shiftGoPollCQ(scq *C.struct_shift_cq, want C.int) (ret C.int) {
	defer guard("poll_cq", &ret)
	q := valueOf[*cq](scq._go)
	n, err := q.v.Poll(q.wcs[:want])
	if err != nil && n == 0 {
		return -fail("poll_cq", err)
	}
	out := unsafe.Slice(scq.wc, int(want))
	for i := range n {
		w := &q.wcs[i]
		if w.Status != verbs.WCSuccess {
			q.ctx.debugWC(w)
		}
		out[i] = C.struct_shift_wc{wr_id: C.uint64_t(w.WRID), status: C.uint32_t(w.Status), opcode: C.uint32_t(w.Opcode),
			vendor_err: C.uint32_t(w.VendorErr), byte_len: C.uint32_t(w.ByteLen), imm: C.uint32_t(w.Imm),
			qp_num: C.uint32_t(w.QPNum), src_qp: C.uint32_t(w.SrcQP), wc_flags: C.uint32_t(w.Flags), sl: C.uint32_t(w.SL)}
	}
	return C.int(n)
}

// debugWC prints an error completion the application is about to see, with the state of its
// QP, when SHIFT_DEBUG=1. Flushes after a QP's first error completion are only counted (the
// count is printed when the QP is destroyed): a failed QP flushes every WR it had
// outstanding, each line with the counters (16 lines for a failed ib_atomic_bw in two runs).
func (c *devctx) debugWC(w *verbs.WC) {
	if cfg, _ := loadConfig(); !cfg.debug {
		return
	}
	msg := fmt.Sprintf("libmlx5-shift: %s: completion %v (%d) for wr_id %#x of QP %#x", c.name, w.Status.Name(), w.Status, w.WRID, w.QPNum)
	if v, ok := c.qps.Load(w.QPNum); ok {
		q := v.(*qp)
		if q.errWCs.Add(1) > 1 && w.Status == verbs.WCWRFlushErr {
			return
		}
		if fq, ok := q.v.(*failover.QP); ok {
			msg += fmt.Sprintf(": SHIFT send %v, receive %v, error %v; %+v", fq.SendState(), fq.RecvState(), fq.Err(), c.fo.Stats())
		}
	}
	fmt.Fprintln(os.Stderr, msg)
}
