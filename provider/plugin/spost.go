package main

/*
#include <stdlib.h>
#include "plugin.h"
*/
import "C"

import (
	"unsafe"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider"
)

// SHIFT mode's posts in C (spost.c): a SHIFT QP's post in the Default state is the provider's
// post on the default QP behind the failover QP's send (receive) gate, receives logged too,
// and C does it over the same memory as Go (the gates' words, the queues' counters and
// tables, the receive log, pinned), so the application's thread enters Go only when SHIFT
// has something to do. Polls likewise (spoll.c, sharePoll). SHIFT_C_DATAPATH=0 leaves every
// post and poll to Go.

// sharePost gives the C posters a SHIFT QP's sends and receives and the C poller its
// completions (a view of both queues' tables in the context's table). The pins are
// released by unsharePost once the QP is destroyed; a QP C cannot be given (no memory) is
// posted through Go.
func sharePost(sqp *C.struct_shift_qp, q *qp) {
	fq, ok := q.v.(*failover.QP)
	if !ok {
		return
	}
	if ss, ok := fq.Default().ShareSend(&q.pin); ok {
		if s := (*C.struct_shift_spost)(C.calloc(1, C.sizeof_struct_shift_spost)); s != nil {
			fillSpost(s, &ss, fq.ShareSendGate(&q.pin))
			sqp.spost = s
		}
	}
	var recvDone *uint64
	if rs, ok := fq.Default().ShareRecv(&q.pin); ok {
		if s := (*C.struct_shift_srecv)(C.calloc(1, C.sizeof_struct_shift_srecv)); s != nil {
			gs := fq.ShareRecvGate(&q.pin)
			fillSrecv(s, &rs, gs)
			recvDone = gs.RecvDone
			sqp.srecv = s
		}
	}
	// The poller's view needs both queues' tables: a QP without one (no receive queue, or
	// no memory) has its completions polled through Go.
	if sqp.spost != nil && sqp.srecv != nil {
		v := (*C.struct_shift_sview)(C.calloc(1, C.sizeof_struct_shift_sview))
		if v == nil {
			return
		}
		v.qpn, v.sq, v.rq = C.uint32_t(fq.QPN()), sqp.spost, sqp.srecv
		v.recv_done = (*C.uint64_t)(unsafe.Pointer(recvDone))
		if C.shift_sview_publish(q.ctx.sctx.fast, v) != 0 {
			C.free(unsafe.Pointer(v))
			return
		}
		sqp.sview = v
	}
}

// sharePoll gives the C poller a SHIFT CQ's default ring (its gate is already C's: peekCQ).
// The pins are released by unsharePoll once the CQ is destroyed.
func sharePoll(scq *C.struct_shift_cq, q *cq) {
	fc, ok := q.v.(*failover.CQ)
	if !ok || scq.peek.ncqe == 0 {
		return
	}
	ps := fc.Default().SharePoll(&q.pin)
	p := (*C.struct_shift_spoll)(C.calloc(1, C.sizeof_struct_shift_spoll))
	if p == nil {
		q.pin.Unpin()
		return
	}
	p.buf, p.ncqe = byteAt(ps.Buf), C.uint32_t(ps.NCQE)
	p.ci = (*C.uint32_t)(unsafe.Pointer(ps.CI))
	p.db = (*C.__be32)(unsafe.Pointer(byteAt(ps.DBRec)))
	p.gate = (*C.uint32_t)(unsafe.Pointer(&scq.peek.gate))
	scq.spoll = p
}

// unsharePoll ends the C poller's use of a destroyed CQ.
func unsharePoll(scq *C.struct_shift_cq, q *cq) {
	C.free(unsafe.Pointer(scq.spoll))
	scq.spoll = nil
	q.pin.Unpin()
}

// fillSrecv writes the receive shares into C's description.
func fillSrecv(s *C.struct_shift_srecv, rs *provider.RecvShare, gs failover.RecvGateShare) {
	s.gate_state = (*C.uint32_t)(unsafe.Pointer(gs.State))
	s.gate_busy = (*C.uint32_t)(unsafe.Pointer(gs.Busy))
	if gs.Asymmetric {
		s.asym = 1
	}
	s.max_recv_wr = C.uint32_t(gs.MaxRecvWR)
	s.log = (*C.struct_shift_rlog_rec)(unsafe.Pointer(&gs.Log[0]))
	s.log_mask = C.uint64_t(len(gs.Log) - 1)
	s.log_sge = (*C.struct_ibv_sge)(unsafe.Pointer(&gs.SGE[0]))
	s.log_stride = C.uint32_t(gs.Stride)
	s.posted = (*C.uint64_t)(unsafe.Pointer(gs.Posted))
	s.qp_state = (*C.uint32_t)(unsafe.Pointer(rs.State))
	s.ring = byteAt(rs.Ring)
	s.wqe_cnt, s.wqe_shift = C.uint32_t(rs.WQECount), C.uint32_t(rs.Shift)
	s.max_post, s.reserve, s.max_gs = C.uint32_t(rs.MaxPost), C.uint32_t(rs.Reserve), C.uint32_t(rs.MaxGS)
	s.head = (*C.uint32_t)(unsafe.Pointer(rs.Head))
	s.ring_head = (*C.uint32_t)(unsafe.Pointer(rs.RingHead))
	s.internal = (*C.uint32_t)(unsafe.Pointer(rs.Internal))
	s.tail = (*C.uint32_t)(unsafe.Pointer(rs.Tail))
	s.int_retired = (*C.uint32_t)(unsafe.Pointer(rs.IntRetired))
	s.wrid = (*C.uint64_t)(unsafe.Pointer(&rs.WRID[0]))
	s.int_at = (*C.uint32_t)(unsafe.Pointer(&rs.IntAt[0]))
	s.db = (*C.__be32)(unsafe.Pointer(byteAt(rs.DBRec)))
}

// fillSpost writes the shares into C's description.
func fillSpost(s *C.struct_shift_spost, ss *provider.SendShare, gs failover.SendGateShare) {
	s.gate_state = (*C.uint32_t)(unsafe.Pointer(gs.State))
	s.gate_busy = (*C.uint32_t)(unsafe.Pointer(gs.Busy))
	if gs.Asymmetric {
		s.asym = 1
	}
	s.qp_state = (*C.uint32_t)(unsafe.Pointer(ss.State))
	s.ring = byteAt(ss.Ring)
	s.wqe_cnt, s.qpn = C.uint32_t(ss.WQECount), C.uint32_t(ss.QPN)
	if ss.SigAll {
		s.sig_all = 1
	}
	s.max_post, s.reserve = C.uint32_t(ss.MaxPost), C.uint32_t(ss.Reserve)
	s.max_gs, s.max_inline = C.uint32_t(ss.MaxGS), C.uint32_t(ss.MaxInline)
	s.cur_post = (*C.uint32_t)(unsafe.Pointer(ss.CurPost))
	s.head = (*C.uint32_t)(unsafe.Pointer(ss.Head))
	s.internal = (*C.uint32_t)(unsafe.Pointer(ss.Internal))
	s.two = (*C.uint32_t)(unsafe.Pointer(ss.Two))
	s.rung = (*C.uint32_t)(unsafe.Pointer(ss.Rung))
	s.retired = (*C.uint64_t)(unsafe.Pointer(ss.Retired))
	s.int_retired = (*C.uint32_t)(unsafe.Pointer(ss.IntRetired))
	s.wrid = (*C.uint64_t)(unsafe.Pointer(&ss.WRID[0]))
	s.wqe_head = (*C.uint32_t)(unsafe.Pointer(&ss.WQEHead[0]))
	s.pos = (*C.uint32_t)(unsafe.Pointer(&ss.Pos[0]))
	s.int_at = (*C.uint32_t)(unsafe.Pointer(&ss.IntAt[0]))
	s.two_at = (*C.uint32_t)(unsafe.Pointer(&ss.TwoAt[0]))
	s.start_of = (*C.uint32_t)(unsafe.Pointer(&ss.StartOf[0]))
	s.nbb = (*C.uint8_t)(unsafe.Pointer(&ss.NBB[0]))
	s.mark = (*C.uint8_t)(unsafe.Pointer(&ss.Mark[0]))
	s.db = (*C.__be32)(unsafe.Pointer(byteAt(ss.DBRec)))
	s.bf_reg = byteAt(ss.BF.Reg)
	s.bf_index, s.bf_buf_size = C.uint32_t(ss.BF.Index), C.uint32_t(ss.BF.BufSize)
	if ss.PreferBF {
		s.prefer_bf = 1
	}
	if ss.ShutUpBF {
		s.shut_up_bf = 1
	}
	s.bf_offset = (*C.int64_t)(unsafe.Pointer(ss.BFOffset))
	if ss.BF.NeedLock {
		s.bf_need_lock = 1
	}
	s.bf_lock = (*C.uint32_t)(unsafe.Pointer(ss.BFLock))
}

// unsharePost ends the C poster's use of a destroyed QP: no post runs (the application
// destroys a QP it no longer posts on), so the description is freed and the pins released.
func unsharePost(sqp *C.struct_shift_qp, q *qp) {
	if sqp.sview != nil {
		C.shift_sview_unpublish(q.ctx.sctx.fast, sqp.sview)
		C.free(unsafe.Pointer(sqp.sview))
	}
	C.free(unsafe.Pointer(sqp.spost))
	C.free(unsafe.Pointer(sqp.srecv))
	sqp.spost, sqp.srecv, sqp.sview = nil, nil, nil
	q.pin.Unpin()
}
