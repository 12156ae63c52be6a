package provider

import "github.com/shift-rdma/shift/mlx5"

// A data path outside the provider: the libibverbs plugin keeps post_send, post_recv and
// poll_cq in C over the rings the provider created (a C→Go call costs several times a whole
// post). Rings describes them; DetachDataPath hands them over: from then on the provider does
// not touch the rings, the doorbell records or the per-WQE tables of that object (a transition
// to RESET and Destroy leave resetting indices and cleaning CQEs to the new owner, who does
// what libmlx5 does there), and its own data-path calls must not be used.

// QPRings describes a QP's rings.
type QPRings struct {
	QPN    uint32
	SigAll bool
	SQ     []byte // SQWQECount 64-byte blocks
	RQ     []byte // RQWQECount WQEs of 1<<RQWQEShift bytes
	// SQWQECount, RQWQECount and RQWQEShift are the ring geometry; SQMaxPost and RQMaxPost
	// the WRs each accepts outstanding; SQMaxGS, RQMaxGS and MaxInline the per-WR limits
	// (libmlx5's max_post, max_gs and max_inline_data).
	SQWQECount, RQWQECount, RQWQEShift int
	SQMaxPost, RQMaxPost               int
	SQMaxGS, RQMaxGS, MaxInline        int
	DBRec                              []byte // 8 bytes: receive counter, send counter
	BF                                 BFRegRings
}

// BFRegRings is the BlueFlame register a QP rings (struct mlx5_bf): registers with the same
// Index are one register shared by several QPs, rung under one lock when NeedLock.
type BFRegRings struct {
	Index    uint32
	Reg      []byte // the two halves
	BufSize  int    // bytes per half; 0: no BlueFlame (the 8-byte doorbell only)
	NeedLock bool
}

// Rings describes the QP's rings.
func (q *QP) Rings() QPRings {
	r := QPRings{QPN: q.qpn, SigAll: q.sq.signalAll, DBRec: q.dbrec}
	if sq := q.sq; sq.wqeCnt > 0 {
		r.SQ, r.SQWQECount, r.SQMaxPost = sq.buf, int(sq.wqeCnt), int(sq.maxPost-sq.reserve)
		r.SQMaxGS, r.MaxInline = sq.maxGS, sq.maxInl
		r.BF = BFRegRings{Index: sq.bf.Index(), Reg: sq.bf.Register(), BufSize: sq.bf.BufSize(), NeedLock: sq.bf.NeedLock}
	}
	if rq := q.rq; rq.wqeCnt > 0 {
		r.RQ, r.RQWQECount, r.RQWQEShift = rq.buf, int(rq.wqeCnt), int(rq.shift)
		r.RQMaxPost, r.RQMaxGS = int(rq.maxPost-rq.reserve), rq.maxGS
	}
	return r
}

// DetachDataPath hands the QP's rings to an outside data path (see QPRings).
func (q *QP) DetachDataPath() { q.detached.Store(true) }

// CQRings describes a CQ's ring.
type CQRings struct {
	CQN   uint32
	Buf   []byte // NCQE 64-byte CQEs
	NCQE  int
	DBRec []byte // 8 bytes: consumer index, arm word
	UAR   []byte // the UAR page whose CQ doorbell (at mlx5.CQDoorbellOffset) arms the CQ
}

// Rings describes the CQ's ring.
func (c *CQ) Rings() CQRings {
	return CQRings{CQN: c.cqn, Buf: c.ring.buf, NCQE: int(c.ring.ncqe), DBRec: c.dbMem.Bytes()[:mlx5.DBRecSize], UAR: c.uar.Bytes()}
}

// DetachDataPath hands the CQ's ring to an outside data path (see QPRings): Poll, Arm and
// the cleaning of QPs' CQEs are the new owner's.
func (c *CQ) DetachDataPath() { c.detached.Store(true) }
