package provider

import (
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// QP is an RC queue pair. Its data path (PostSend, PostRecv) runs without locks against the
// rings; control verbs (Modify, Query, Destroy) serialise on mu and publish the state with an
// atomic store the data path reads.
type QP struct {
	ctx    *Context
	id     uint64 // user handle the kernel echoes in async events
	pd     *PD
	sendCQ *CQ
	recvCQ *CQ
	handle uint32
	qpn    uint32
	uidx   uint32 // CQE version 1 user index (noUserIndex on version 0)
	cap    verbs.QPCap

	state atomic.Uint32 // QPState
	// mu orders the control verbs that change or refresh state (Modify, Query, Destroy);
	// the data path only loads state.
	mu sync.Mutex

	mem   *Buffer // RQ followed by SQ (mlx5_alloc_qp_buf)
	dbMem *Buffer // doorbell record page (owned when not shared)
	dbrec []byte  // 8 bytes: receive counter, send counter
	sq    *sendQueue
	rq    *recvQueue
	bfIdx uint32      // bfreg index the kernel assigned
	dead  atomic.Bool // destroyed: the ring memory is gone
	// detached: the rings belong to an outside data path (DetachDataPath).
	detached atomic.Bool
}

// QPN is the QP number.
func (q *QP) QPN() uint32 { return q.qpn }

// UserHandle is the handle the kernel echoes as the element of the QP's async events.
func (q *QP) UserHandle() uint64 { return q.id }

// Cap is what the QP really provides (rounded as libmlx5 reports it back).
func (q *QP) Cap() verbs.QPCap { return q.cap }

// initRings lays the rings over the QP buffer as mlx5_alloc_qp_buf does (RQ at offset 0, SQ
// at sqOffset) and binds them to the doorbell record and the bfreg.
func (q *QP) initRings(l qpLayout, signalAll bool, bf *mlx5.BFReg) error {
	b := q.mem.Bytes()
	db, err := mlx5.NewDBRec(q.dbrec)
	if err != nil {
		return err
	}
	if l.sqWQECnt > 0 {
		ring, err := mlx5.NewSQ(b[l.sqOffset:l.sqOffset+l.sqWQECnt*sendWQEBB], l.sqWQECnt)
		if err != nil {
			return err
		}
		q.sq = newSendQueue(ring, bf, db, l.sqWQESize, uint32(l.sqMaxPost), l.sqMaxGS, l.maxInline, q.qpn, signalAll)
	} else {
		q.sq = &sendQueue{db: db}
	}
	if l.rqWQECnt > 0 {
		rb := b[:l.rqWQECnt<<l.rqWQEShift]
		ring, err := mlx5.NewRQ(rb, l.rqWQECnt, l.rqWQEShift)
		if err != nil {
			return err
		}
		q.rq = newRecvQueue(ring, rb, db, l.rqWQEShift, uint32(l.rqMaxPost))
	} else {
		q.rq = &recvQueue{db: db}
	}
	q.cap = verbs.QPCap{MaxSendWR: uint32(l.sqMaxPost), MaxRecvWR: uint32(l.rqMaxPost),
		MaxSendSGE: uint32(l.sqMaxGS), MaxRecvSGE: uint32(l.rqMaxGS), MaxInlineData: uint32(max(l.maxInline, 0))}
	return nil
}
