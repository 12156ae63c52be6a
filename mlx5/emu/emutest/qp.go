package emutest

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/uverbs"
)

// QP is an RC QP with its rings and blue-flame register, as libmlx5 lays them out: one buffer
// with the receive queue first and the send queue after it, a doorbell record, and the bfreg
// the kernel assigned.
type QP struct {
	c          *Ctx
	Handle     uint32
	QPN        uint32
	UserHandle uint64
	SQ         *mlx5.SQ
	RQ         *mlx5.RQ
	DB         mlx5.DBRec
	BF         *mlx5.BFReg
	SendCQ     *CQ
	RecvCQ     *CQ
	Port       uint8

	unrung int         // WQEs posted since the last doorbell
	last   mlx5.Posted // the last of them
}

// QPSize describes the rings: SQ basic blocks and RQ entries (powers of two), receive SGEs.
type QPSize struct {
	SQWQEBBs, RQWQEs, RecvSGE int
}

// DefaultSize is a 64-WQEBB SQ and a 64-entry RQ of one SGE.
var DefaultSize = QPSize{SQWQEBBs: 64, RQWQEs: 64, RecvSGE: 1}

// CreateQP creates an RC QP through the ioctl path.
func (c *Ctx) CreateQP(scq, rcq *CQ, sz QPSize) *QP {
	c.T.Helper()
	shift := 4
	for 1<<shift < 16*sz.RecvSGE {
		shift++
	}
	rqBytes := sz.RQWQEs << shift
	buf := c.Mem(rqBytes + sz.SQWQEBBs*64)
	dbm := c.Mem(64)
	db, err := mlx5.NewDBRec(dbm[:8])
	if err != nil {
		c.T.Fatal(err)
	}
	sq, err := mlx5.NewSQ(buf[rqBytes:], sz.SQWQEBBs)
	if err != nil {
		c.T.Fatal(err)
	}
	sq.MaxInline = 256
	rq, err := mlx5.NewRQ(buf[:rqBytes], sz.RQWQEs, shift)
	if err != nil {
		c.T.Fatal(err)
	}
	ud := mlx5.CreateQP{BufAddr: uverbs.Addr(buf), DBAddr: uverbs.Addr(dbm), SQWQECount: uint32(sz.SQWQEBBs),
		RQWQECount: uint32(sz.RQWQEs), RQWQEShift: uint32(shift)}
	in := make([]byte, mlx5.CreateQPSize)
	ud.Put(in)
	out := make([]byte, mlx5.CreateQPRespSize)
	q := &QP{c: c, UserHandle: c.userHandle(), SQ: sq, RQ: rq, DB: db, SendCQ: scq, RecvCQ: rcq, Port: 1}
	r, err := uverbs.CreateQP(c.File, uverbs.DriverIDMLX5, uverbs.CreateQPRequest{Type: uverbs.QPTypeRC, PD: c.PD,
		SendCQ: scq.Handle, RecvCQ: rcq.Handle, UserHandle: q.UserHandle, AsyncFD: c.AsyncFD,
		Cap: uverbs.QPCap{Send_wr: uint32(sz.SQWQEBBs), Recv_wr: uint32(sz.RQWQEs), Send_sge: 4, Recv_sge: uint32(sz.RecvSGE), Inline_data: 64}},
		in, out)
	if err != nil {
		c.T.Fatalf("create qp: %v", err)
	}
	q.Handle, q.QPN = r.Handle, r.QPN
	dr, err := mlx5.DecodeCreateQPResp(out)
	if err != nil {
		c.T.Fatal(err)
	}
	loc, err := c.Layout.Locate(dr.BfregIndex)
	if err != nil {
		c.T.Fatalf("bfreg %d: %v", dr.BfregIndex, err)
	}
	uar, err := mlx5.NewUARPage(c.UARs[loc.SysPage])
	if err != nil {
		c.T.Fatal(err)
	}
	if q.BF, err = mlx5.NewBFReg(uar, loc); err != nil {
		c.T.Fatal(err)
	}
	return q
}

// ConnParams are the RC attributes Connect uses.
type ConnParams struct {
	PathMTU                  uint8 // uverbs.MTU*
	Timeout, RetryCnt        uint8
	RNRRetry, MinRNRTimer    uint8
	MaxRdAtomic, MaxDestRdAt uint8
	Access                   uint32
	SQPSN, RQPSN             uint32 // a's send PSN = b's receive PSN and vice versa
}

// DefaultConn is perftest-like: MTU 1024, timeout 14, retry 7, rnr_retry 7.
var DefaultConn = ConnParams{PathMTU: uverbs.MTU1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12,
	MaxRdAtomic: 16, MaxDestRdAt: 16, Access: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic,
	SQPSN: 0x1000, RQPSN: 0x2000}

// Modify applies one modify_qp.
func (q *QP) Modify(a *uverbs.QPAttr, mask uint32) error {
	return uverbs.ModifyQP(q.c.File, q.Handle, a, mask, nil)
}

// GID is the RoCEv2 GID of the QP's port.
func (q *QP) GID() [16]byte { return q.c.Dev.Ports()[q.Port-1].GID() }

// ToRTS moves q through INIT and RTR to RTS against the remote QP rqpn at rgid.
func (q *QP) ToRTS(t testing.TB, rgid [16]byte, rqpn uint32, p ConnParams, sqPSN, rqPSN uint32) {
	t.Helper()
	a := uverbs.QPAttr{State: uverbs.QPStateInit, Port: q.Port, AccessFlags: p.Access}
	if err := q.Modify(&a, uverbs.QPAttrState|uverbs.QPAttrPkeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatalf("qp %#x to INIT: %v", q.QPN, err)
	}
	a = uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: p.PathMTU, DestQPN: rqpn, RQPSN: rqPSN,
		MaxDestRdAtomic: p.MaxDestRdAt, MinRNRTimer: p.MinRNRTimer,
		AV: uverbs.Path{DGID: rgid, IsGlobal: true, HopLimit: 64, Port: q.Port}}
	if err := q.Modify(&a, uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|
		uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRdAtomic|uverbs.QPAttrMinRNRTimer); err != nil {
		t.Fatalf("qp %#x to RTR: %v", q.QPN, err)
	}
	a = uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: p.Timeout, RetryCnt: p.RetryCnt, RNRRetry: p.RNRRetry,
		SQPSN: sqPSN, MaxRdAtomic: p.MaxRdAtomic}
	if err := q.Modify(&a, uverbs.QPAttrState|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|uverbs.QPAttrRNRRetry|
		uverbs.QPAttrSQPSN|uverbs.QPAttrMaxQPRdAtomic); err != nil {
		t.Fatalf("qp %#x to RTS: %v", q.QPN, err)
	}
}

// Connect brings a and b to RTS against each other.
func Connect(t testing.TB, a, b *QP, p ConnParams) {
	t.Helper()
	a.ToRTS(t, b.GID(), b.QPN, p, p.SQPSN, p.RQPSN)
	b.ToRTS(t, a.GID(), a.QPN, p, p.RQPSN, p.SQPSN)
}

// WR is one send work request in verbs terms.
type WR struct {
	Op         mlx5.Opcode
	Local      []mlx5.DataSeg
	Inline     []byte
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
	Compare    uint64
	SwapAdd    uint64
	Unsignaled bool
	Fence      bool
	Solicited  bool
}

// Post writes a WQE into the send queue without ringing the doorbell (the doorbell record is
// not touched either: the next Ring publishes everything).
func (q *QP) Post(t testing.TB, wr WR) mlx5.Posted {
	t.Helper()
	b := q.SQ.Begin()
	switch wr.Op {
	case mlx5.OpcodeRDMAWrite, mlx5.OpcodeRDMAWriteImm, mlx5.OpcodeRDMARead:
		b.Raddr(mlx5.RaddrSeg{RemoteAddr: wr.RemoteAddr, RKey: wr.RKey})
	case mlx5.OpcodeAtomicCS:
		b.Raddr(mlx5.RaddrSeg{RemoteAddr: wr.RemoteAddr, RKey: wr.RKey})
		b.Atomic(mlx5.CompareSwap(wr.Compare, wr.SwapAdd))
	case mlx5.OpcodeAtomicFA:
		b.Raddr(mlx5.RaddrSeg{RemoteAddr: wr.RemoteAddr, RKey: wr.RKey})
		b.Atomic(mlx5.FetchAdd(wr.SwapAdd))
	}
	if wr.Inline != nil {
		if err := b.Inline(wr.Inline); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range wr.Local {
		b.Data(s)
	}
	ctrl := mlx5.CtrlSeg{Opcode: wr.Op, QPN: q.QPN, Imm: wr.Imm}
	if !wr.Unsignaled {
		ctrl.FMCESE |= mlx5.CtrlCQUpdate
	}
	if wr.Solicited {
		ctrl.FMCESE |= mlx5.CtrlSolicited
	}
	if wr.Fence {
		ctrl.FMCESE |= mlx5.CtrlFence
	}
	p, err := b.Finish(ctrl)
	if err != nil {
		t.Fatal(err)
	}
	q.unrung++
	q.last = p
	return p
}

// Ring rings the send doorbell for everything posted since the last Ring (post_send_db).
func (q *QP) Ring() {
	if q.unrung == 0 {
		return
	}
	q.BF.Ring(q.SQ, q.DB, q.unrung, q.last, false)
	q.unrung = 0
}

// PostRing posts one WR and rings.
func (q *QP) PostRing(t testing.TB, wr WR) mlx5.Posted {
	t.Helper()
	p := q.Post(t, wr)
	q.Ring()
	return p
}

// PostRecv posts a receive WQE with the scatter list and publishes it in the doorbell record.
func (q *QP) PostRecv(t testing.TB, sges ...mlx5.DataSeg) {
	t.Helper()
	if _, err := q.RQ.Post(sges); err != nil {
		t.Fatal(err)
	}
	q.RQ.Ring(q.DB)
}

// SGE is the data segment for b (inside mr).
func SGE(mr *MR, b []byte) mlx5.DataSeg {
	return mlx5.DataSeg{ByteCount: uint32(len(b)), LKey: mr.LKey, Addr: uverbs.Addr(b)}
}

// Reset moves the QP to RESET and restarts the ring indexes and doorbell record at 0, as
// libmlx5's mlx5_modify_qp does after a transition to RESET (mlx5_init_qp_indices).
func (q *QP) Reset(t testing.TB) {
	t.Helper()
	if err := q.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
		t.Fatalf("qp %#x to RESET: %v", q.QPN, err)
	}
	q.SQ.SetCurPost(0)
	q.RQ.SetHead(0)
	q.DB.SetSendCounter(0)
	q.DB.SetRecvCounter(0)
	q.unrung = 0
}
