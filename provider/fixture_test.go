package provider

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// ConnectX-6-like limits, as mlx5_ib reports them in alloc_ucontext.
var testLimits = queueLimits{MaxSQDescSize: 512, MaxRQDescSize: 512, MaxSendWQEBB: 1 << 15, MaxRecvWR: 1 << 15}

// ringQP is a QP and its CQ built over plain memory with no kernel and no NIC: the unit tests
// write WQEs into the rings and play the NIC themselves (read WQEs, write CQEs).
type ringQP struct {
	qp  *QP
	cq  *CQ
	uar *Buffer
}

func newRingQP(t testing.TB, c verbs.QPCap, blueFlame bool) *ringQP {
	t.Helper()
	l, err := calcQPLayout(testLimits, c)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := NewBuffer(l.bufSize)
	if err != nil {
		t.Fatal(err)
	}
	db, err := NewBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	uar, err := NewBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	ncqe, _ := calcCQEntries(256)
	cqMem, err := NewBuffer(ncqe * mlx5.CQE64Size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Free(); db.Free(); uar.Free(); cqMem.Free() })
	qp := &QP{qpn: 0x1234, mem: mem, dbMem: db, dbrec: db.Bytes()[0:8]}
	page, err := mlx5.NewUARPage(uar.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	idx := uint32(0)
	if blueFlame {
		idx = 1
	}
	bf, err := mlx5.NewBFReg(page, mlx5.Bfreg{Index: idx, Offset: 0x800, BufSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.initRings(l, false, bf); err != nil {
		t.Fatal(err)
	}
	qp.state.Store(uint32(verbs.QPStateRTS))
	cqdb, err := mlx5.NewDBRec(db.Bytes()[8:16])
	if err != nil {
		t.Fatal(err)
	}
	ring, err := newCQRing(cqMem.Bytes(), ncqe, cqdb)
	if err != nil {
		t.Fatal(err)
	}
	cq := &CQ{cqn: 7, cqe: ncqe - 1, mem: cqMem, uar: page, ring: ring}
	cq.attach(qp)
	qp.sendCQ, qp.recvCQ = cq, cq
	return &ringQP{qp: qp, cq: cq, uar: uar}
}

// lastDoorbell is the UAR half the last send doorbell went to.
func (r *ringQP) lastDoorbell() []byte {
	off := r.qp.sq.bf.CurrentOffset() ^ 256
	return r.uar.Bytes()[off : off+256]
}

// nicCQE plays the NIC: it writes a CQE64 at the CQ's producer position pi with the owner bit
// of that pass.
func (r *ringQP) nicCQE(pi uint32, c mlx5.CQE64) {
	r.cq.ring.ring.Publish(pi, &c)
}

// sqWQE returns the bytes of the WQE whose control segment is at SQ position pos, unwrapped.
func (r *ringQP) sqWQE(t testing.TB, pos uint32) (mlx5.CtrlSeg, []byte) {
	t.Helper()
	sq := r.qp.sq
	off := int(pos&sq.mask) * 64
	c, err := mlx5.DecodeCtrlSeg(sq.buf[off:])
	if err != nil {
		t.Fatal(err)
	}
	n := int(c.DS) * 16
	out := make([]byte, 0, n)
	for i := 0; i < n; i += 16 {
		out = append(out, sq.seg(off+i)...)
	}
	return c, out
}
