package provider

import (
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// recvQueue is the software side of an mlx5 RQ: WQEs of 1<<shift bytes holding data segments,
// terminated by an invalid-lkey segment when shorter than the stride (mlx5_post_recv).
// head counts posted WRs; tail counts retired ones (each responder CQE retires one, in order).
type recvQueue struct {
	ring    *mlx5.RQ
	db      mlx5.DBRec
	buf     []byte
	wqeCnt  uint32
	mask    uint32
	shift   uint
	maxPost uint32
	maxGS   int

	head uint32 // mirrors ring.Head()
	tail atomic.Uint32
	wrid []uint64
	// reserve, internal, intRetired and intAt are the send queue's (see sendQueue.reserve),
	// for SHIFT's control RECV on the default QP.
	reserve    uint32
	internal   uint32
	intRetired atomic.Uint32
	intAt      []uint32
	scratch    []mlx5.DataSeg // one WR's scatter list in PRM form (maxGS entries)
	// raceSync orders wrid and intAt for the race detector (race_on.go), as the send queue's.
	raceSync atomic.Uint32
}

func newRecvQueue(ring *mlx5.RQ, buf []byte, db mlx5.DBRec, shift int, maxPost uint32) *recvQueue {
	n := uint32(ring.WQECount())
	return &recvQueue{ring: ring, db: db, buf: buf, wqeCnt: n, mask: n - 1, shift: uint(shift),
		maxPost: maxPost, maxGS: ring.MaxSGE(), wrid: make([]uint64, n), intAt: make([]uint32, n),
		scratch: make([]mlx5.DataSeg, ring.MaxSGE())}
}

func (q *recvQueue) validate(wrs []verbs.RecvWR, internal bool) error {
	outstanding := q.head - q.tail.Load()
	limit, used := q.maxPost, outstanding
	if !internal {
		limit -= q.reserve
		used -= q.internal - q.intRetired.Load()
	}
	if used+uint32(len(wrs)) > limit || outstanding+uint32(len(wrs)) > q.maxPost {
		return &verbs.WRError{Op: "post_recv", Index: int(limit - min(used, limit)),
			Limit: int(limit), Got: int(used) + len(wrs), Err: verbs.ErrRQFull}
	}
	for i := range wrs {
		if len(wrs[i].SGL) > q.maxGS {
			return &verbs.WRError{Op: "post_recv", Index: i, Limit: q.maxGS, Got: len(wrs[i].SGL), Err: verbs.ErrTooManySGE}
		}
	}
	return nil
}

// write builds the receive WQEs (mlx5_post_recv) and publishes them through the doorbell
// record with package mlx5's RQ.
func (q *recvQueue) write(wrs []verbs.RecvWR, internal bool) {
	for i := range wrs {
		wr := &wrs[i]
		sg := q.scratch[:len(wr.SGL)]
		for k, s := range wr.SGL {
			sg[k] = mlx5.DataSeg{ByteCount: s.Length, LKey: s.LKey, Addr: s.Addr}
		}
		// Cannot fail: validate bounded the SGE count.
		idx, _ := q.ring.Post(sg)
		q.wrid[idx] = wr.WRID
		q.head++
		if internal {
			q.internal++
		}
		q.intAt[idx&q.mask] = q.internal
	}
	raceRelease(&q.raceSync)
	q.ring.Ring(q.db)
}

// retire consumes the receive WQE named by a responder CQE's wqe_counter.
func (q *recvQueue) retire(wqeCounter uint16) uint64 {
	raceAcquire(&q.raceSync)
	idx := uint32(wqeCounter) & q.mask
	// The slot's wr_id is read before the new tail frees it: a poster on another thread that
	// sees the tail may write the slot at once (SHIFT's engine posts receives on the default
	// QP while the application polls).
	wrid := q.wrid[idx]
	// Only the poller writes tail; a store (not an atomic add) publishes it.
	q.intRetired.Store(q.intAt[idx])
	q.tail.Store(q.tail.Load() + 1)
	return wrid
}
