package main

/*
#include <endian.h>
#include <stdlib.h>
#include "fast.h"

static void check_set_imm(struct ibv_send_wr *w, uint32_t imm)
{
	w->imm_data = htobe32(imm);
}

static uint32_t check_imm(const struct shift_fwc *w)
{
	return be32toh(w->imm);
}

static void check_set_rdma(struct ibv_send_wr *w, uint64_t ra, uint32_t rkey)
{
	w->wr.rdma.remote_addr = ra;
	w->wr.rdma.rkey = rkey;
}

static void check_set_atomic(struct ibv_send_wr *w, uint64_t ra, uint32_t rkey, uint64_t compare_add, uint64_t swap)
{
	w->wr.atomic.remote_addr = ra;
	w->wr.atomic.rkey = rkey;
	w->wr.atomic.compare_add = compare_add;
	w->wr.atomic.swap = swap;
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The C data path's functions reached from Go, for fast_test.go (cgo is not allowed in test
// files): a C send queue over a ring Go mapped, and the C CQE reader over a CQ buffer.

// checkMaxSGE bounds the SGEs of a WR checkSQ.write takes (more than any QP's max_gs, so
// that over-long lists reach the C validation).
const checkMaxSGE = 64

// checkSQ is a struct shift_sq in C memory, with one WR and its SGE array.
type checkSQ struct {
	sq   *C.struct_shift_sq
	wr   *C.struct_ibv_send_wr
	sges *C.struct_ibv_sge
}

func newCheckSQ(ring []byte, wqeCnt, maxGS, maxInline int, qpn uint32, sigAll bool, cur uint32) *checkSQ {
	s := &checkSQ{
		sq:   (*C.struct_shift_sq)(C.calloc(1, C.sizeof_struct_shift_sq)),
		wr:   (*C.struct_ibv_send_wr)(C.calloc(1, C.sizeof_struct_ibv_send_wr)),
		sges: (*C.struct_ibv_sge)(C.calloc(checkMaxSGE, C.sizeof_struct_ibv_sge)),
	}
	s.sq.buf = byteAt(ring)
	s.sq.wqe_cnt = C.uint32_t(wqeCnt)
	s.sq.max_post = C.uint32_t(wqeCnt)
	s.sq.max_gs = C.uint32_t(maxGS)
	s.sq.max_inline = C.uint32_t(maxInline)
	s.sq.qpn = C.uint32_t(qpn)
	if sigAll {
		s.sq.sig_all = 1
	}
	s.sq.cur_post = C.uint32_t(cur)
	s.sq.wrid = (*C.uint64_t)(C.calloc(C.size_t(wqeCnt), 8))
	s.sq.wqe_head = (*C.uint32_t)(C.calloc(C.size_t(wqeCnt), 4))
	return s
}

func (s *checkSQ) free() {
	C.free(unsafe.Pointer(s.sq.wrid))
	C.free(unsafe.Pointer(s.sq.wqe_head))
	C.free(unsafe.Pointer(s.sq))
	C.free(unsafe.Pointer(s.wr))
	C.free(unsafe.Pointer(s.sges))
}

// write validates and writes one WR as post_send would (without the doorbell): the errno of
// a rejected WR, else the last WQE's offset in the ring, its DS, whether it was inline, and
// the producer counter after it. SGE addresses must be memory C may read (not Go's heap).
func (s *checkSQ) write(w *verbs.SendWR) (off, ds int, inl bool, cur uint32, err unix.Errno) {
	*s.wr = C.struct_ibv_send_wr{wr_id: C.uint64_t(w.WRID), opcode: uint32(w.Opcode), send_flags: C.uint(w.Flags),
		num_sge: C.int(len(w.SGL)), sg_list: s.sges}
	C.check_set_imm(s.wr, C.uint32_t(w.Imm))
	if len(w.SGL) > checkMaxSGE {
		panic("checkSQ.write: more than checkMaxSGE SGEs")
	}
	sg := unsafe.Slice(s.sges, checkMaxSGE)
	for i, g := range w.SGL {
		sg[i] = C.struct_ibv_sge{addr: C.uint64_t(g.Addr), length: C.uint32_t(g.Length), lkey: C.uint32_t(g.LKey)}
	}
	switch w.Opcode {
	case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAdd:
		C.check_set_atomic(s.wr, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), C.uint64_t(w.CompareAdd), C.uint64_t(w.Swap))
	default:
		C.check_set_rdma(s.wr, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey))
	}
	if e := C.shift_sq_validate(s.sq, s.wr); e != 0 {
		return 0, 0, false, 0, unix.Errno(e)
	}
	var nreq, cds, cinl C.int
	p := C.shift_sq_write(s.sq, s.wr, &nreq, &cds, &cinl)
	off = int(uintptr(unsafe.Pointer(p)) - uintptr(unsafe.Pointer(s.sq.buf)))
	// What post_send's caller does once completions came back: keep the queue empty.
	s.sq.tail = s.sq.head
	return off, int(cds), cinl != 0, uint32(s.sq.cur_post), 0
}

// checkCQE reads the CQE at consumer index ci of an ncqe-entry CQ buffer with shift_cq_next,
// in mlx5.FastWC's terms; ok is false when the entry is the device's.
func checkCQE(buf []byte, ncqe int, ci uint32) (w mlx5.FastWC, ok bool) {
	cq := C.struct_shift_cqr{buf: byteAt(buf), ncqe: C.uint32_t(ncqe), cons_index: C.uint32_t(ci)}
	var fw C.struct_shift_fwc
	var ctr C.uint16_t
	var recv C.int
	if C.shift_cq_next(&cq, &fw, &ctr, &recv) == 0 {
		return w, false
	}
	return mlx5.FastWC{Status: mlx5.WCStatus(fw.status), Opcode: mlx5.WCOpcode(fw.opcode), Flags: mlx5.WCFlags(fw.wc_flags),
		ByteLen: uint32(fw.byte_len), Imm: uint32(C.check_imm(&fw)),
		QPN: uint32(fw.qp_num), SrcQP: uint32(fw.src_qp), SL: uint8(fw.sl), VendorErr: uint8(fw.vendor_err),
		WQECounter: uint16(ctr), Receive: recv != 0}, true
}

// checkCQEmpty is shift_cq_empty at consumer index ci.
func checkCQEmpty(buf []byte, ncqe int, ci uint32) bool {
	cq := C.struct_shift_cqr{buf: byteAt(buf), ncqe: C.uint32_t(ncqe), cons_index: C.uint32_t(ci)}
	return C.shift_cq_empty(&cq) != 0
}
