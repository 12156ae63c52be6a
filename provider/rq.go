package provider

import (
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
)

// recvQueue is the software side of an mlx5 RQ: WQEs of 1<<shift bytes holding data segments,
// terminated by an invalid-lkey segment when shorter than the stride (mlx5_post_recv).
// head counts posted WRs; tail counts retired ones (each responder CQE retires one, in order).
type recvQueue struct {
	buf     []byte
	wqeCnt  uint32
	mask    uint32
	shift   uint
	maxPost uint32
	maxGS   int

	head uint32
	tail atomic.Uint32
	wrid []uint64
}

func newRecvQueue(buf []byte, wqeCnt uint32, shift int, maxPost uint32, maxGS int) *recvQueue {
	return &recvQueue{buf: buf, wqeCnt: wqeCnt, mask: wqeCnt - 1, shift: uint(shift),
		maxPost: maxPost, maxGS: maxGS, wrid: make([]uint64, wqeCnt)}
}

func (q *recvQueue) validate(wrs []RecvWR) error {
	outstanding := q.head - q.tail.Load()
	if outstanding+uint32(len(wrs)) > q.maxPost {
		return &WRError{Op: "post_recv", Index: int(q.maxPost - min(outstanding, q.maxPost)),
			Limit: int(q.maxPost), Got: int(outstanding) + len(wrs), Err: ErrRQFull}
	}
	for i := range wrs {
		if len(wrs[i].SGL) > q.maxGS {
			return &WRError{Op: "post_recv", Index: i, Limit: q.maxGS, Got: len(wrs[i].SGL), Err: ErrTooManySGE}
		}
	}
	return nil
}

func (q *recvQueue) write(wrs []RecvWR) {
	for i := range wrs {
		wr := &wrs[i]
		idx := q.head & q.mask
		base := int(idx) << q.shift
		j := 0
		for _, s := range wr.SGL {
			if s.Length == 0 {
				continue
			}
			d := mlx5.DataSeg{ByteCount: s.Length, LKey: s.LKey, Addr: s.Addr}
			o := base + j*mlx5.DataSegSize
			d.Put(q.buf[o : o+16])
			j++
		}
		if j < q.maxGS {
			o := base + j*mlx5.DataSegSize
			mlx5.TerminatorSeg.Put(q.buf[o : o+16])
		}
		q.wrid[idx] = wr.WRID
		q.head++
	}
}

// retire consumes the receive WQE named by a responder CQE's wqe_counter.
func (q *recvQueue) retire(wqeCounter uint16) uint64 {
	idx := uint32(wqeCounter) & q.mask
	q.tail.Add(1)
	return q.wrid[idx]
}
