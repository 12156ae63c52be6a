package provider

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Sizes of the PRM segments, in bytes (struct mlx5_wqe_*_seg, infiniband/mlx5dv.h). The
// sizing arithmetic below only needs their lengths; their contents belong to package mlx5.
const (
	sendWQEBB     = 64 // MLX5_SEND_WQE_BB
	ctrlSegSize   = 16 // struct mlx5_wqe_ctrl_seg
	raddrSegSize  = 16 // struct mlx5_wqe_raddr_seg
	atomicSegSize = 16 // struct mlx5_wqe_atomic_seg
	dataSegSize   = 16 // struct mlx5_wqe_data_seg
	inlineHdrSize = 4  // struct mlx5_wqe_inline_seg (byte_count)
	// memory-window overhead that rdma-core reserves for RC QPs by default (BIND_MW and
	// LOCAL_INV are in the default send ops): ctrl + umr_ctrl (48) + mkey_context (64) +
	// max(umr_klm (16), 64).
	mwOverhead = ctrlSegSize + 48 + 64 + 64
)

// Limits the context learned from the mlx5 alloc_ucontext response.
type queueLimits struct {
	MaxSQDescSize int // max_sq_desc_sz
	MaxRQDescSize int // max_rq_desc_sz
	MaxSendWQEBB  int // max_send_wqebb
	MaxRecvWR     int // device max_qp_wr
}

// qpLayout is the outcome of rdma-core's mlx5_calc_wq_size for an RC QP: one buffer holding
// the RQ at offset 0 followed by the SQ.
type qpLayout struct {
	sqWQESize  int // bytes per send WQE slot before rounding the ring (multiple of 64)
	sqWQECnt   int // SQ ring size in WQEBBs (power of two)
	sqMaxPost  int // WRs the SQ accepts at once
	sqMaxGS    int
	maxInline  int
	rqWQECnt   int // RQ ring size in WQEs (power of two)
	rqWQEShift int // log2 of the RQ stride
	rqMaxPost  int
	rqMaxGS    int
	sqOffset   int // byte offset of the SQ in the buffer (= RQ bytes)
	bufSize    int // total bytes
}

// rcSQOverhead is _sq_overhead for an RC QP with rdma-core's default send ops: the control
// segment plus the largest operation overhead (memory-window binds win over RDMA and atomics).
func rcSQOverhead() int {
	size := ctrlSegSize
	size = max(size, ctrlSegSize+raddrSegSize)
	size = max(size, ctrlSegSize+raddrSegSize+atomicSegSize)
	size = max(size, mwOverhead)
	return size
}

func alignUp(v, a int) int { return (v + a - 1) / a * a }

func roundupPow2(v int) int {
	n := 1
	for n < v {
		n <<= 1
	}
	return n
}

func ilog2(v int) int {
	n := 0
	for (1 << n) < v {
		n++
	}
	return n
}

// calcSendWQE is mlx5_calc_send_wqe: the bytes of one send WQE slot.
func calcSendWQE(lim queueLimits, c verbs.QPCap) (int, error) {
	size := rcSQOverhead()
	inlSize := 0
	if c.MaxInlineData > 0 {
		inlSize = size + alignUp(inlineHdrSize+int(c.MaxInlineData), 16)
	}
	maxGather := (lim.MaxSQDescSize - size) / dataSegSize
	if int(c.MaxSendSGE) > maxGather {
		return 0, fmt.Errorf("%w: max_send_sge %d > %d", verbs.ErrInvalidArgument, c.MaxSendSGE, maxGather)
	}
	size += int(c.MaxSendSGE) * dataSegSize
	tot := max(size, inlSize)
	if tot > lim.MaxSQDescSize {
		return 0, fmt.Errorf("%w: send WQE of %d bytes > max_sq_desc_sz %d", verbs.ErrInvalidArgument, tot, lim.MaxSQDescSize)
	}
	return alignUp(tot, sendWQEBB), nil
}

// calcRecvWQE is mlx5_calc_rcv_wqe (no SRQ, no signature).
func calcRecvWQE(lim queueLimits, c verbs.QPCap) (int, error) {
	size := dataSegSize * max(int(c.MaxRecvSGE), 1)
	if size > lim.MaxRQDescSize {
		return 0, fmt.Errorf("%w: receive WQE of %d bytes > max_rq_desc_sz %d", verbs.ErrInvalidArgument, size, lim.MaxRQDescSize)
	}
	return roundupPow2(size), nil
}

// calcQPLayout is mlx5_calc_wq_size for an RC QP without SRQ: SQ and RQ sizes, and what the
// caps become (libmlx5 writes max_inline_data back; max_send_wr/max_recv_wr come back as the
// max_post values, as mlx5_create_qp reports them).
func calcQPLayout(lim queueLimits, c verbs.QPCap) (qpLayout, error) {
	var l qpLayout
	if c.MaxSendWR > 0 {
		w, err := calcSendWQE(lim, c)
		if err != nil {
			return l, err
		}
		l.maxInline = w - rcSQOverhead() - inlineHdrSize
		if int(c.MaxSendWR) > 0x7fffffff/lim.MaxSQDescSize {
			return l, fmt.Errorf("%w: max_send_wr %d too large", verbs.ErrInvalidArgument, c.MaxSendWR)
		}
		wq := roundupPow2(int(c.MaxSendWR) * w)
		l.sqWQESize = w
		l.sqWQECnt = wq / sendWQEBB
		if l.sqWQECnt > lim.MaxSendWQEBB {
			return l, fmt.Errorf("%w: SQ of %d WQEBBs > max_send_wqebb %d", verbs.ErrInvalidArgument, l.sqWQECnt, lim.MaxSendWQEBB)
		}
		l.sqMaxPost = wq / w
		l.sqMaxGS = int(c.MaxSendSGE)
	}
	rqBytes := 0
	if c.MaxRecvWR > 0 {
		if lim.MaxRecvWR > 0 && int(c.MaxRecvWR) > lim.MaxRecvWR {
			return l, fmt.Errorf("%w: max_recv_wr %d > device max %d", verbs.ErrInvalidArgument, c.MaxRecvWR, lim.MaxRecvWR)
		}
		w, err := calcRecvWQE(lim, c)
		if err != nil {
			return l, err
		}
		rqBytes = max(roundupPow2(int(c.MaxRecvWR))*w, sendWQEBB)
		l.rqWQECnt = rqBytes / w
		l.rqWQEShift = ilog2(w)
		l.rqMaxPost = 1 << ilog2(l.rqWQECnt)
		l.rqMaxGS = w / dataSegSize
	}
	l.sqOffset = rqBytes
	l.bufSize = rqBytes + l.sqWQECnt*sendWQEBB
	return l, nil
}

// calcCQEntries is align_queue_size(cqe + 1) of mlx5_create_cq: the ring holds a power of two
// of CQEs and the CQ reports one less to the caller.
func calcCQEntries(cqe int) (int, error) {
	if cqe < 1 {
		return 0, fmt.Errorf("%w: cqe %d < 1", verbs.ErrInvalidArgument, cqe)
	}
	n := roundupPow2(cqe + 1)
	if n > 1<<24 {
		return 0, fmt.Errorf("%w: cqe %d > %d", verbs.ErrInvalidArgument, cqe, 1<<24-1)
	}
	return n, nil
}
