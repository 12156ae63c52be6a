package provider

import (
	"runtime"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
)

// A second poster for a QP the provider keeps (SHIFT's default QPs in the plugin): unlike
// DetachDataPath, which hands the rings over for good, ShareSend lets code outside Go (the
// plugin's C post_send) post on the send queue as PostSend does, taking turns with the Go
// poster. Both write the same counters and per-WQE tables, so the layer above's failover
// (OutstandingSends, CopySendWQE, the holds and retires of the poller) sees one history.
// Taking turns is the caller's: exactly one poster at a time, and every store of one visible
// to the next (the layer above's send gate, whose leave is a release and whose close waits
// for the poster to leave).

// SendShare is the send queue of a QP as a second poster writes it. The pointers address
// memory pinned by ShareSend; the poster must post exactly what PostSend would (validate's
// limits, encodeWR's bytes, record's tables, ringSQ's doorbell) or leave the post to it.
type SendShare struct {
	QPN    uint32
	SigAll bool
	// State is the QP's verbs.QPState; posts are accepted in RTS only (canSend).
	State *atomic.Uint32
	// Ring is the send queue, WQECount 64-byte blocks.
	Ring     []byte
	WQECount uint32
	// MaxPost is the WRs the queue holds outstanding in all; Reserve of them are kept for
	// internal posts (an application post may have MaxPost-Reserve outstanding not counting
	// the internal ones, see sendQueue.validate). MaxGS and MaxInline are the per-WR limits.
	MaxPost, Reserve   uint32
	MaxGS, MaxInline   int
	CurPost            *uint32 // producer position in blocks (mlx5.SQ's cur_post)
	Head, Internal     *uint32 // WRs posted; internal WRs posted
	Two, Rung          *uint32 // two-sided application WRs posted; position last rung
	Retired            *atomic.Uint64
	IntRetired         *atomic.Uint32
	WRID               []uint64 // per block index of a WQE's first block: sendQueue's tables
	WQEHead, Pos       []uint32
	IntAt, TwoAt       []uint32
	StartOf            []uint32 // per block index of a WQE's last block
	NBB                []uint8
	Mark               []bool
	DBRec              []byte // the QP's doorbell record: receive counter, send counter
	BF                 BFRegRings
	BFOffset           *int    // the half the next BlueFlame write goes to
	BFLock             *uint32 // the register's lock when BF.NeedLock (mlx5.BFReg.LockWord)
	PreferBF, ShutUpBF bool
}

// ShareSend describes the QP's send queue to a second poster and pins, with p, the Go memory
// the description points into, so that C may keep the addresses (runtime.Pinner's rule); the
// caller unpins once the QP is destroyed and the other poster dropped them. It reports false
// for a QP without a send queue or whose data path was detached.
func (q *QP) ShareSend(p *runtime.Pinner) (SendShare, bool) {
	sq := q.sq
	if sq == nil || sq.wqeCnt == 0 || q.detached.Load() {
		return SendShare{}, false
	}
	// The pins: the QP (its state word), the send queue (the counters), the ring's producer
	// counter and the register's offset, and each table's backing array.
	p.Pin(q)
	p.Pin(sq)
	p.Pin(sq.ring)
	p.Pin(sq.bf)
	p.Pin(&sq.wrid[0])
	p.Pin(&sq.wqeHead[0])
	p.Pin(&sq.pos[0])
	p.Pin(&sq.intAt[0])
	p.Pin(&sq.twoAt[0])
	p.Pin(&sq.startOf[0])
	p.Pin(&sq.nbb[0])
	p.Pin(&sq.mark[0])
	return SendShare{
		QPN: sq.qpn, SigAll: sq.signalAll, State: &q.state,
		Ring: sq.buf, WQECount: sq.wqeCnt, MaxPost: sq.maxPost, Reserve: sq.reserve,
		MaxGS: sq.maxGS, MaxInline: sq.maxInl,
		CurPost: sq.ring.CurPostWord(), Head: &sq.head, Internal: &sq.internal, Two: &sq.two, Rung: &sq.rung,
		Retired: &sq.retired, IntRetired: &sq.intRetired,
		WRID: sq.wrid, WQEHead: sq.wqeHead, Pos: sq.pos, IntAt: sq.intAt, TwoAt: sq.twoAt,
		StartOf: sq.startOf, NBB: sq.nbb, Mark: sq.mark,
		DBRec:    q.dbrec,
		BF:       BFRegRings{Index: sq.bf.Index(), Reg: sq.bf.Register(), BufSize: sq.bf.BufSize(), NeedLock: sq.bf.NeedLock},
		BFOffset: sq.bf.OffsetWord(), BFLock: sq.bf.LockWord(), PreferBF: sq.bf.PreferBF, ShutUpBF: sq.bf.ShutUpBF,
	}, true
}

// RecvShare is the receive queue of a QP as a second poster writes it (see SendShare): the
// poster must post exactly what PostRecv would (validate's limits, write's scatter lists and
// terminators, the tables, the doorbell record) or leave the post to it.
type RecvShare struct {
	// State is the QP's verbs.QPState; receives are accepted from INIT to SQD (canRecv).
	State *atomic.Uint32
	// Ring is WQECount WQEs of 1<<Shift bytes; MaxGS scatter entries fill one.
	Ring             []byte
	WQECount, Shift  uint32
	MaxPost, Reserve uint32
	MaxGS            int
	// Head counts WRs posted, RingHead is the ring's producer counter (the two advance
	// together); Internal counts internal WRs posted.
	Head, RingHead, Internal *uint32
	Tail, IntRetired         *atomic.Uint32
	WRID                     []uint64 // by WQE index
	IntAt                    []uint32
	DBRec                    []byte
}

// ShareRecv describes the QP's receive queue to a second poster and pins, with p, the Go
// memory the description points into (see ShareSend).
func (q *QP) ShareRecv(p *runtime.Pinner) (RecvShare, bool) {
	rq := q.rq
	if rq == nil || rq.wqeCnt == 0 || q.detached.Load() {
		return RecvShare{}, false
	}
	p.Pin(q)
	p.Pin(rq)
	p.Pin(rq.ring)
	p.Pin(&rq.wrid[0])
	p.Pin(&rq.intAt[0])
	return RecvShare{State: &q.state, Ring: rq.buf, WQECount: rq.wqeCnt, Shift: uint32(rq.shift),
		MaxPost: rq.maxPost, Reserve: rq.reserve, MaxGS: rq.maxGS,
		Head: &rq.head, RingHead: rq.ring.HeadWord(), Internal: &rq.internal,
		Tail: &rq.tail, IntRetired: &rq.intRetired, WRID: rq.wrid, IntAt: rq.intAt, DBRec: q.dbrec}, true
}

// CQPollShare is a CQ's ring as a second poller reads it (the plugin's C poll_cq in SHIFT
// mode): it must consume only what Poll would return as it returns it, retiring each WQE in
// its QP's shared tables (SendShare, RecvShare) as Poll does, and publish the consumer index
// in the doorbell record. Taking turns with Poll is the caller's, as for posts.
type CQPollShare struct {
	Buf   []byte // NCQE 64-byte CQEs
	NCQE  uint32
	CI    *uint32 // the consumer index
	DBRec []byte  // set_ci, arm
}

// SharePoll describes the CQ's ring to a second poller and pins, with p, the Go memory the
// description points into; the caller unpins once the CQ is destroyed.
func (c *CQ) SharePoll(p *runtime.Pinner) CQPollShare {
	p.Pin(c.ring.ring)
	return CQPollShare{Buf: c.ring.buf, NCQE: c.ring.ncqe, CI: c.ring.ring.CIWord(), DBRec: c.dbMem.Bytes()[:mlx5.DBRecSize]}
}
