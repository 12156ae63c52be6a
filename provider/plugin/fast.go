package main

/*
#include "plugin.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider"
)

// The C data path (fast.c): in plain mode the plugin hands each QP's and CQ's rings to C at
// creation, so post_send, post_recv, poll_cq and the CQ arm never enter Go (a C→Go call
// alone costs several times a whole post). In SHIFT mode the Default state's posts and polls
// are C too, over memory Go shares (spost.go); an empty poll in that state is two loads
// (peekCQ); everything else goes through Go.

// byteAt is the address of b's first byte, or nil for an empty slice. The memory is an mmap
// of the provider's (rings, doorbell records, UAR pages), never Go's heap.
func byteAt(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

// fastCQ hands a plain provider CQ's ring to C; other CQs (SHIFT's) stay on the Go path.
func fastCQ(sctx *C.struct_shift_context, scq *C.struct_shift_cq, v any) error {
	p, ok := v.(*provider.CQ)
	if !ok {
		return nil
	}
	r := p.Rings()
	cr := C.struct_shift_cq_rings{cqn: C.uint32_t(r.CQN), ncqe: C.uint32_t(r.NCQE), buf: byteAt(r.Buf),
		dbrec: byteAt(r.DBRec), uar: byteAt(r.UAR)}
	f := C.shift_fast_cq_new(sctx.fast, &cr)
	if f == nil {
		return fmt.Errorf("the C data path for CQ %#x: %w", r.CQN, unix.ENOMEM)
	}
	p.DetachDataPath()
	scq.fast = f
	return nil
}

// peekCQ shows C a SHIFT-mode CQ's gate and default ring (struct shift_cq_peek), so that an
// empty poll is answered without entering Go.
func peekCQ(scq *C.struct_shift_cq, v any) {
	f, ok := v.(*failover.CQ)
	if !ok {
		return
	}
	r := f.Default().Rings()
	// The gate word is C memory (inside the calloc'd struct shift_cq), which Go's atomics may
	// use; it outlives the failover CQ (freed after destroy_cq).
	f.ShareGate((*atomic.Uint32)(unsafe.Pointer(&scq.peek.gate)))
	scq.peek.buf = byteAt(r.Buf)
	scq.peek.db = (*C.__be32)(unsafe.Pointer(byteAt(r.DBRec)))
	scq.peek.ncqe = C.uint32_t(r.NCQE) // last: a non-zero ncqe turns the peek on
}

// fastQP hands a plain provider QP's rings to C when its CQs are C's.
func fastQP(sctx *C.struct_shift_context, sqp *C.struct_shift_qp, scq, rcq *C.struct_shift_cq, v any) error {
	p, ok := v.(*provider.QP)
	if !ok || scq.fast == nil || rcq.fast == nil {
		return nil
	}
	r := p.Rings()
	qr := C.struct_shift_qp_rings{qpn: C.uint32_t(r.QPN), sq: byteAt(r.SQ), rq: byteAt(r.RQ),
		sq_wqe_cnt: C.uint32_t(r.SQWQECount), rq_wqe_cnt: C.uint32_t(r.RQWQECount), rq_wqe_shift: C.uint32_t(r.RQWQEShift),
		sq_max_post: C.uint32_t(r.SQMaxPost), rq_max_post: C.uint32_t(r.RQMaxPost),
		sq_max_gs: C.uint32_t(r.SQMaxGS), rq_max_gs: C.uint32_t(r.RQMaxGS), max_inline: C.uint32_t(r.MaxInline),
		dbrec: byteAt(r.DBRec), bf_index: C.uint32_t(r.BF.Index), bf_buf_size: C.uint32_t(r.BF.BufSize), bf_reg: byteAt(r.BF.Reg)}
	if r.SigAll {
		qr.sig_all = 1
	}
	if r.BF.NeedLock {
		qr.bf_need_lock = 1
	}
	f := C.shift_fast_qp_new(sctx.fast, &qr)
	if f == nil {
		return fmt.Errorf("the C data path for QP %#x: %w", r.QPN, unix.ENOMEM)
	}
	if e := C.shift_fast_qp_publish(sctx.fast, f); e != 0 {
		C.shift_fast_qp_free(f)
		return fmt.Errorf("the C data path for QP %#x: %w", r.QPN, unix.Errno(e))
	}
	p.DetachDataPath()
	sqp.fast = f
	return nil
}
