package main

/*
#include <endian.h>
#include <stdlib.h>
#include "fast.h"
#include "check.h"

static uint32_t check_imm(const struct shift_fwc *w)
{
	return be32toh(w->imm);
}

// check_post_loop posts n single WRs on a QP over the given rings with no device behind them
// (the BlueFlame register is plain memory), marking each retired at once as a NIC completing
// everything would, as package provider's PostSend benchmarks do: inline 64-byte RDMA WRITE
// (BlueFlame) or one 4 KiB SGE (8-byte doorbell).
static int check_post_loop(struct shift_fast_ctx *c, uint8_t *sq, uint8_t *dbrec, uint8_t *bf, uint8_t *src, long n, int inl)
{
	struct shift_qp_rings r = { .qpn = 0x99, .sq = sq, .sq_wqe_cnt = 256, .sq_max_post = 256, .sq_max_gs = 1,
				    .max_inline = 64, .dbrec = dbrec, .bf_index = 1, .bf_buf_size = 256, .bf_reg = bf };
	struct shift_fast_qp *qp = shift_fast_qp_new(c, &r);
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = inl ? 64 : 4096, .lkey = 5 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE }, *bad;
	int err = 0;

	if (!qp)
		return ENOMEM;
	wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	wr.wr.rdma.remote_addr = 0x1000;
	wr.wr.rdma.rkey = 1;
	for (long i = 0; i < n && !err; i++) {
		err = shift_fast_post_send(qp, &wr, &bad);
		__atomic_store_n(&qp->sq.tail, qp->sq.head, __ATOMIC_RELEASE);
	}
	shift_fast_qp_free(qp);
	return err;
}

// check_poll_loop polls an empty CQ n times as shift_poll_cq does.
static int check_poll_loop(struct shift_fast_ctx *c, uint8_t *buf, uint8_t *dbrec, long n)
{
	struct shift_cq_rings r = { .cqn = 1, .ncqe = 64, .buf = buf, .dbrec = dbrec };
	struct shift_cqr *cq = shift_fast_cq_new(c, &r);
	struct ibv_wc wc;
	int got = 0;

	if (!cq)
		return -1;
	for (int i = 0; i < 64; i++)
		buf[i * 64 + 63] = MLX5_CQE_INVALID << 4;
	for (long i = 0; i < n; i++)
		got += shift_cq_empty(cq) ? 0 : shift_fast_poll(c, cq, 1, &wc);
	shift_fast_cq_free(cq);
	return got;
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

// checkPostLoop runs check_post_loop over rings in memory Go mapped: n posts of a 64-byte
// inline WRITE (inline) or a one-SGE WRITE.
func checkPostLoop(sq, dbrec, bf, src []byte, n int, inline bool) error {
	c := C.shift_fast_ctx_new()
	defer C.shift_fast_ctx_free(c)
	il := C.int(0)
	if inline {
		il = 1
	}
	if e := C.check_post_loop(c, byteAt(sq), byteAt(dbrec), byteAt(bf), byteAt(src), C.long(n), il); e != 0 {
		return unix.Errno(e)
	}
	return nil
}

// checkPollLoop runs check_poll_loop: n polls of an empty 64-entry CQ; it returns the
// completions found (0).
func checkPollLoop(buf, dbrec []byte, n int) int {
	c := C.shift_fast_ctx_new()
	defer C.shift_fast_ctx_free(c)
	return int(C.check_poll_loop(c, byteAt(buf), byteAt(dbrec), C.long(n)))
}
