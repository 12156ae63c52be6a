package main

/*
#include <stdlib.h>
#include "plugin.h"
#include "check.h"

static struct ibv_send_wr *check_wr_at(struct ibv_send_wr *a, int i) { return &a[i]; }

// check_spost_loop posts n signaled 64-byte inline WRITEs with the SHIFT-mode C poster,
// writes each one's requester CQE as a NIC would and polls it with the C poller, as
// BenchmarkSharedPostPoll's Go loop does through the provider; it returns the completions
// polled.
static long check_spost_loop(struct shift_fast_ctx *c, struct shift_spost *s, struct shift_spoll *p, uint8_t *src, long n)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = 1 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE };
	struct ibv_wc wc;
	long got = 0;

	wr.wr.rdma.remote_addr = 0x1000;
	wr.wr.rdma.rkey = 1;
	for (long i = 0; i < n; i++) {
		uint32_t pos = *s->cur_post, ci = *p->ci;
		uint8_t *e = p->buf + (size_t)(ci & (p->ncqe - 1)) * 64;

		if (shift_spost_send(s, &wr))
			return -1;
		e[56] = MLX5_OPCODE_RDMA_WRITE;
		e[57] = s->qpn >> 16;
		e[58] = s->qpn >> 8;
		e[59] = s->qpn;
		e[60] = pos >> 8;
		e[61] = pos;
		__atomic_store_n(&e[63], MLX5_CQE_REQ << 4 | ((ci & p->ncqe) ? MLX5_CQE_OWNER_MASK : 0), __ATOMIC_RELEASE);
		got += shift_spoll_cq(c, p, 1, &wc);
	}
	return got;
}
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

// The C posters' constants, for TestSharedPostWords.
const (
	checkGateOpen = C.SHIFT_GATE_OPEN
	checkGateBusy = C.SHIFT_GATE_BUSY
	checkQPSInit  = C.SHIFT_QPS_INIT
	checkQPSRTS   = C.SHIFT_QPS_RTS
	checkQPSSQD   = C.SHIFT_QPS_SQD
	checkSendMark = C.SHIFT_SEND_MARK
)

// checkSpost is a C poster of one provider QP.
type checkSpost struct {
	s    *C.struct_shift_spost
	wrs  *C.struct_ibv_send_wr
	sges *C.struct_ibv_sge
	pin  runtime.Pinner
}

// newCheckSpost shares q's send queue with a C poster behind gate; it reports false for a QP
// without a send queue.
func newCheckSpost(q *provider.QP, gate failover.SendGateShare) (*checkSpost, bool) {
	c := &checkSpost{}
	ss, ok := q.ShareSend(&c.pin)
	if !ok {
		c.pin.Unpin()
		return nil, false
	}
	c.pin.Pin(gate.State)
	c.pin.Pin(gate.Busy)
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

// checkSpoll is the C poller of one provider CQ, with the views of the QPs whose C posters
// are given, behind a gate word in C memory.
type checkSpoll struct {
	ctx      *C.struct_shift_fast_ctx
	p        *C.struct_shift_spoll
	views    []*C.struct_shift_sview
	recvDone *C.uint64_t
	wcs      *C.struct_ibv_wc
	pin      runtime.Pinner
}

const checkMaxWCs = 16

func newCheckSpoll(cq *provider.CQ, qpn uint32, s *checkSpost, r *checkSrecv) *checkSpoll {
	c := &checkSpoll{ctx: C.shift_fast_ctx_new()}
	ps := cq.SharePoll(&c.pin)
	c.p = (*C.struct_shift_spoll)(C.calloc(1, C.sizeof_struct_shift_spoll))
	c.p.buf, c.p.ncqe = byteAt(ps.Buf), C.uint32_t(ps.NCQE)
	c.p.ci = (*C.uint32_t)(unsafe.Pointer(ps.CI))
	c.p.db = (*C.__be32)(unsafe.Pointer(byteAt(ps.DBRec)))
	c.p.gate = (*C.uint32_t)(C.calloc(1, 4))
	c.recvDone = (*C.uint64_t)(C.calloc(1, 8))
	c.wcs = (*C.struct_ibv_wc)(C.calloc(checkMaxWCs, C.sizeof_struct_ibv_wc))
	v := (*C.struct_shift_sview)(C.calloc(1, C.sizeof_struct_shift_sview))
	v.qpn, v.sq, v.rq, v.recv_done = C.uint32_t(qpn), s.s, r.s, c.recvDone
	if C.shift_sview_publish(c.ctx, v) != 0 {
		panic("newCheckSpoll: publish")
	}
	c.views = append(c.views, v)
	return c
}

func (c *checkSpoll) free() {
	for _, v := range c.views {
		C.shift_sview_unpublish(c.ctx, v)
		C.free(unsafe.Pointer(v))
	}
	C.free(unsafe.Pointer(c.p.gate))
	C.free(unsafe.Pointer(c.p))
	C.free(unsafe.Pointer(c.recvDone))
	C.free(unsafe.Pointer(c.wcs))
	C.shift_fast_ctx_free(c.ctx)
	c.pin.Unpin()
}

// gate is the CQ's gate word (0 open, 1 busy, 2 closed).
func (c *checkSpoll) gate() *uint32 { return (*uint32)(unsafe.Pointer(c.p.gate)) }

// received is the receive count the poller kept.
func (c *checkSpoll) received() uint64 { return uint64(*c.recvDone) }

// poll runs shift_spoll_cq for up to want completions, as the provider's verbs.WC.
func (c *checkSpoll) poll(want int) []verbs.WC {
	if want > checkMaxWCs {
		panic("checkSpoll.poll: more than checkMaxWCs")
	}
	n := int(C.shift_spoll_cq(c.ctx, c.p, C.int(want), c.wcs))
	out := make([]verbs.WC, n)
	for i, w := range unsafe.Slice(c.wcs, n) {
		out[i] = verbs.WC{WRID: uint64(w.wr_id), Status: verbs.WCStatus(w.status), Opcode: verbs.WCOpcode(w.opcode),
			VendorErr: uint32(w.vendor_err), ByteLen: uint32(w.byte_len), Imm: uint32(C.check_wc_imm(&unsafe.Slice(c.wcs, n)[i])),
			QPNum: uint32(w.qp_num), SrcQP: uint32(w.src_qp), Flags: verbs.WCFlags(w.wc_flags), SL: uint8(w.sl)}
	}
	return out
}

// loop runs check_spost_loop: n posts and polls in C.
func (c *checkSpoll) loop(s *checkSpost, src []byte, n int) int {
	return int(C.check_spost_loop(c.ctx, s.s, c.p, byteAt(src), C.long(n)))
}
