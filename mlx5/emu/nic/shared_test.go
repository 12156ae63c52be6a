package nic

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
)

// sharedGroup creates n QPs on host a that all ring one fresh shared register through one
// locked handle (as the provider does for a medium-latency bfreg), each connected to a QP
// of its own on host b.
func (e *env) sharedGroup(n int) (as, bs []*qpEnd, reg int) {
	e.t.Helper()
	h := e.a
	if h.next >= BfregsPerUAR {
		h.newUAR()
	}
	reg = h.next
	h.next++
	first, _ := SQDoorbellOffsets(reg)
	bf, err := mlx5.NewBFReg(h.page, mlx5.Bfreg{Index: uint32(reg), Offset: first, BufSize: bfregSize / 2})
	if err != nil {
		e.t.Fatal(err)
	}
	bf.NeedLock = true
	for range n {
		a := h.newQPOn(h.newCQ(64), h.newCQ(64), h.uar, reg, bf)
		b := e.b.newQP(e.b.newCQ(64), e.b.newCQ(64))
		connect(e.t, a, b)
		as, bs = append(as, a), append(bs, b)
	}
	return as, bs, reg
}

// A WQE SHIFT withholds (written in the ring, neither advertised in the doorbell record nor
// rung) never runs on a shared register either, however often the other QPs of the register
// ring and make the device re-check every QP on it; ringing it runs it.
func TestSharedBfregWithheld(t *testing.T) {
	e := newEnv(t)
	as, bs, _ := e.sharedGroup(3)
	w, wb := as[0], bs[0]
	fill(w.mem[:256], 9)
	p := w.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{w.seg(0, 256)}, raddr: wb.va(0), rkey: wb.mr.RKey, signaled: true})
	for i := range 10 {
		for k, q := range as[1:] {
			fill(q.mem[i*64:(i+1)*64], byte(i+k))
			q.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{q.seg(i*64, 64)}, raddr: bs[k+1].va(i * 64), rkey: bs[k+1].mr.RKey, signaled: true})
			checkCQE(t, q.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
		}
	}
	watcherPasses(t, e.a.dev, 20)
	if e.a.dev.Stats().SharedRechecks == 0 {
		t.Fatal("the device never re-checked the shared register's QPs")
	}
	if !w.scq.empty() || !bytes.Equal(wb.mem[:256], make([]byte, 256)) {
		t.Fatal("a withheld WQE ran on a shared register")
	}
	w.bf.Ring(w.sq, w.db, 1, p, false)
	checkCQE(t, w.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if !bytes.Equal(wb.mem[:256], w.mem[:256]) {
		t.Fatal("data not written after the doorbell")
	}
}

// A doorbell overwritten by another QP's before the device looked is not lost: the device
// re-checks every QP of the register against its doorbell record. The overwrite is made
// deterministic by advertising the WQE in the record and never writing its doorbell.
func TestSharedBfregHiddenDoorbell(t *testing.T) {
	e := newEnv(t)
	as, bs, _ := e.sharedGroup(2)
	x, y := as[0], as[1]
	fill(x.mem[:512], 3)
	fill(y.mem[:512], 4)
	x.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{x.seg(0, 512)}, raddr: bs[0].va(0), rkey: bs[0].mr.RKey, signaled: true})
	mlx5.ToDeviceBarrier()
	x.db.SetSendCounter(x.sq.CurPost()) // its register write was "overwritten"
	y.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{y.seg(0, 512)}, raddr: bs[1].va(0), rkey: bs[1].mr.RKey, signaled: true})
	checkCQE(t, y.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	checkCQE(t, x.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if !bytes.Equal(bs[0].mem[:512], x.mem[:512]) || !bytes.Equal(bs[1].mem[:512], y.mem[:512]) {
		t.Fatal("data differs")
	}
	if s := e.a.dev.Stats(); s.SQDoorbells != 1 || s.WQEsExecuted != 2 {
		t.Fatalf("%d doorbells, %d WQEs executed; want 1 and 2", s.SQDoorbells, s.WQEsExecuted)
	}
}

// QPs sharing one register post and ring concurrently; every WRITE completes with its data.
func TestSharedBfregConcurrent(t *testing.T) {
	e := newEnv(t)
	const (
		nQP    = 8
		rounds = 40
		batch  = 8
		msg    = 128
	)
	as, bs, _ := e.sharedGroup(nQP)
	var wg sync.WaitGroup
	errs := make(chan error, nQP)
	for k := range nQP {
		q, r := as[k], bs[k]
		fill(q.mem[:rounds*batch*msg], byte(k*17))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				for j := range batch {
					off := (i*batch + j) * msg
					q.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{q.seg(off, msg)}, raddr: r.va(off), rkey: r.mr.RKey, signaled: j == batch-1})
				}
				c := q.scq.pollNoFatal()
				if c == nil {
					errs <- fmt.Errorf("qp %d round %d: no completion within the guard (lost doorbell?)", k, i)
					return
				}
				if wc := c.Completion(); wc.Status != mlx5.WCSuccess {
					errs <- fmt.Errorf("qp %d round %d: %v", k, i, wc.Status)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for k := range nQP {
		n := rounds * batch * msg
		if !bytes.Equal(bs[k].mem[:n], as[k].mem[:n]) {
			t.Errorf("qp %d: data differs", k)
		}
	}
}

// A shared register takes only shared QPs and a dedicated one only its QP; a doorbell
// naming a QP that is not bound to a shared register is dropped as stray.
func TestSharedBfregBinding(t *testing.T) {
	e := newEnv(t)
	as, bs, reg := e.sharedGroup(2)
	cfg := func(reg int, shared bool) QPConfig {
		return QPConfig{PD: 1, SendCQ: as[0].scq.cq, RecvCQ: as[0].rcq.cq, Buf: addrOf(e.alloc(8192)),
			SQWQEBBs: 64, DBRec: addrOf(e.alloc(64)), UAR: e.a.uar, Bfreg: reg, SharedBfreg: shared}
	}
	if _, err := e.a.dev.CreateQP(cfg(reg, false)); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("dedicated QP on a shared register: %v, want EBUSY", err)
	}
	d := e.a.newQP(e.a.newCQ(16), e.a.newCQ(16))
	if _, err := e.a.dev.CreateQP(cfg(int(d.bf.Index()), true)); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("shared QP on a dedicated register: %v, want EBUSY", err)
	}
	// d's doorbell written into the shared register: stray, and d does not run.
	p := d.build(wqe{op: mlx5.OpcodeNOP, signaled: true})
	var v [8]byte
	copy(v[:], d.sq.Buf()[p.Offset:p.Offset+8])
	off, _ := SQDoorbellOffsets(reg)
	e.a.page.Store64(off, v)
	waitUntil(t, "stray doorbell counted", func() bool { return e.a.dev.Stats().StrayDoorbells == 1 })
	if !d.scq.empty() {
		t.Fatal("a doorbell through a foreign shared register ran the QP")
	}
	// Destroying one QP of the register leaves the other working.
	if err := as[0].qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	fill(as[1].mem[:64], 5)
	as[1].post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{as[1].seg(0, 64)}, raddr: bs[1].va(0), rkey: bs[1].mr.RKey, signaled: true})
	checkCQE(t, as[1].scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
}
