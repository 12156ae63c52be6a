package nic

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
)

// A WQE written and advertised in the doorbell record, but whose UAR doorbell is withheld,
// never runs; ringing it runs it. This is what SHIFT's fence relies on.
func TestWithheldDoorbell(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	fill(a.mem[:256], 1)
	p := a.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 256)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	mlx5.ToDeviceBarrier()
	a.db.SetSendCounter(a.sq.CurPost()) // the record says the WQE is there

	// Let the watcher look at every register many times, then check nothing happened.
	watcherPasses(t, e.a.dev, 20)
	if !a.scq.empty() {
		t.Fatal("a CQE appeared for a WQE whose doorbell was never rung")
	}
	if !bytes.Equal(b.mem[:256], make([]byte, 256)) {
		t.Fatal("the responder's memory changed although no doorbell was rung")
	}
	if s := e.a.dev.Stats(); s.WQEsExecuted != 0 || s.SQDoorbells != 0 {
		t.Fatalf("device executed %d WQEs after %d doorbells, want none", s.WQEsExecuted, s.SQDoorbells)
	}

	// Now ring it: the 8-byte doorbell with the control segment's first 8 bytes.
	a.bf.Ring(a.sq, a.db, 1, p, false)
	checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if !bytes.Equal(b.mem[:256], a.mem[:256]) {
		t.Fatal("data not written after the doorbell")
	}
}

// Several WQEs behind one doorbell all run (the doorbell record covers them), and an
// unsignaled WQE produces no CQE: the next signaled CQE carries its own wqe_counter.
func TestBatchAndUnsignaled(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	var last mlx5.Posted
	for i := 0; i < 5; i++ {
		fill(a.mem[i*64:(i+1)*64], byte(i))
		last = a.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(i*64, 64)}, raddr: b.va(i * 64), rkey: b.mr.RKey, signaled: i == 4})
	}
	a.bf.Ring(a.sq, a.db, 5, last, false)
	wc := checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if wc.WQECounter != last.WQEIndex {
		t.Fatalf("CQE for wqe %d, want the last (signaled) wqe %d", wc.WQECounter, last.WQEIndex)
	}
	watcherPasses(t, e.a.dev, 3)
	if !a.scq.empty() {
		t.Fatal("unsignaled WQEs produced CQEs")
	}
	if !bytes.Equal(b.mem[:320], a.mem[:320]) {
		t.Fatal("batched writes incomplete")
	}
}

// A QP in RTR keeps rung WQEs until it reaches RTS.
func TestDoorbellBeforeRTS(t *testing.T) {
	e := newEnv(t)
	a := e.a.newQP(e.a.newCQ(16), e.a.newCQ(16))
	b := e.b.newQP(e.b.newCQ(16), e.b.newCQ(16))
	for _, st := range []QPState{QPSInit, QPSRTR} {
		if err := a.qp.Modify(st, attrsFor(a, b)); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []QPState{QPSInit, QPSRTR, QPSRTS} {
		if err := b.qp.Modify(st, attrsFor(b, a)); err != nil {
			t.Fatal(err)
		}
	}
	fill(a.mem[:100], 4)
	a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 100)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	watcherPasses(t, e.a.dev, 10)
	if !a.scq.empty() || !bytes.Equal(b.mem[:100], make([]byte, 100)) {
		t.Fatal("a WQE ran while the QP was in RTR")
	}
	if err := a.qp.Modify(QPSRTS, attrsFor(a, b)); err != nil {
		t.Fatal(err)
	}
	checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if !bytes.Equal(b.mem[:100], a.mem[:100]) {
		t.Fatal("data not written after RTS")
	}
}

// Each QP owns its register; a second QP on the same bfreg is refused, and a doorbell naming
// another QP through a register it does not own is dropped.
func TestBfregOwnership(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	_, err := e.a.dev.CreateQP(QPConfig{PD: 1, SendCQ: a.scq.cq, RecvCQ: a.rcq.cq, Buf: addrOf(e.alloc(8192)),
		SQWQEBBs: 64, DBRec: addrOf(e.alloc(64)), UAR: e.a.uar, Bfreg: 1})
	if !errors.Is(err, ErrBusy) || !errors.Is(err, unix.EBUSY) {
		t.Fatalf("second QP on a used bfreg: %v, want EBUSY", err)
	}
	// A doorbell for a's QPN written into a free register of the page.
	p := a.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	a.db.SetSendCounter(a.sq.CurPost())
	off, _ := SQDoorbellOffsets(3)
	var v [8]byte
	copy(v[:], a.sq.Buf()[p.Offset:p.Offset+8])
	e.a.page.Store64(off, v)
	waitUntil(t, "stray doorbell counted", func() bool { return e.a.dev.Stats().StrayDoorbells == 1 })
	watcherPasses(t, e.a.dev, 5)
	if !a.scq.empty() {
		t.Fatal("a doorbell through a foreign register ran the QP")
	}
	a.bf.Ring(a.sq, a.db, 1, p, false)
	checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
}
