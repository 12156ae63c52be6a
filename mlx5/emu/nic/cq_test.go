package nic

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5"
)

// An armed CQ raises exactly one event for the completions that follow, then stays quiet
// until it is armed again (with the next arm sequence number, as libmlx5 does after each
// event).
func TestCompletionEventOncePerArm(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	write := func() {
		a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	}

	// Not armed: completions, no event.
	write()
	a.scq.poll()
	watcherPasses(t, e.a.dev, 3)
	if n := a.scq.events.Load(); n != 0 {
		t.Fatalf("%d events on an unarmed CQ", n)
	}

	a.scq.arm(false)
	watcherPasses(t, e.a.dev, 3) // the arm doorbell has been consumed
	for i := 0; i < 3; i++ {
		write()
		a.scq.poll()
	}
	watcherPasses(t, e.a.dev, 3)
	if n := a.scq.events.Load(); n != 1 {
		t.Fatalf("%d events for one arm, want 1", n)
	}

	// Re-armed with the next sequence number: one more event.
	a.scq.sn++
	a.scq.arm(false)
	watcherPasses(t, e.a.dev, 3)
	write()
	write()
	a.scq.poll()
	a.scq.poll()
	watcherPasses(t, e.a.dev, 3)
	if n := a.scq.events.Load(); n != 2 {
		t.Fatalf("%d events after the second arm, want 2", n)
	}

	// Arming while a CQE past the consumer index is waiting raises the event at once.
	write()
	waitUntil(t, "CQE", func() bool { return !a.scq.empty() })
	a.scq.sn++
	a.scq.arm(false)
	waitUntil(t, "immediate event", func() bool { return a.scq.events.Load() == 3 })
	a.scq.poll()
}

// A CQ armed for solicited completions ignores ordinary receives and fires on a solicited one.
func TestSolicitedArm(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	for i := 0; i < 3; i++ {
		b.postRecv(i*256, 256)
	}
	b.rcq.arm(true)
	watcherPasses(t, e.b.dev, 3)
	a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 8)}, signaled: true})
	checkCQE(t, b.rcq.poll(), mlx5.CQERespSend, mlx5.WCSuccess)
	watcherPasses(t, e.b.dev, 3)
	if n := b.rcq.events.Load(); n != 0 {
		t.Fatalf("%d events for an unsolicited receive on a solicited-only arm", n)
	}
	a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 8)}, signaled: true, solicited: true})
	ce := b.rcq.poll()
	checkCQE(t, ce, mlx5.CQERespSend, mlx5.WCSuccess)
	if !ce.SolicitedEvent() {
		t.Fatal("solicited receive CQE without the SE bit")
	}
	waitUntil(t, "solicited event", func() bool { return b.rcq.events.Load() == 1 })
}

// Two CQs armed through the same page's CQ doorbell back to back: the second write may
// overwrite the first before the watcher reads it, yet both CQs are armed (the device checks
// the arm words of the page's other CQs).
func TestSharedCQDoorbell(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	for i := 0; i < 50; i++ {
		a.scq.arm(false)
		a.rcq.arm(false) // same register, written right after
		a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
		a.scq.poll()
		waitUntil(t, "send CQ event", func() bool { return a.scq.events.Load() == int32(i+1) })
		a.scq.sn++
		b.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{b.seg(0, 8)}, signaled: true})
		a.postRecvFor(t)
		b.scq.poll()
		a.rcq.poll()
		waitUntil(t, "recv CQ event", func() bool { return a.rcq.events.Load() == int32(i+1) })
		a.rcq.sn++
	}
}

// An arm doorbell the device acts on late: software armed at consumer index 0 (the record
// written, then the register), polled past it, and the device wrote a full ring of CQEs more
// before it looked at the register, so more than a ring's worth of entries lie past the arm's
// index. The event is still due at once: every WQE has completed and the CQ is full as far as
// the device knows, so no later CQE can raise it (the failover storm test's hang under CPU
// load, where the doorbell watcher ran late).
func TestLateArmBehindFullRing(t *testing.T) {
	e := newEnv(t)
	const n = 4
	scq := e.a.newCQ(n)
	a := e.a.newQP(scq, e.a.newCQ(n))
	b := e.b.newQP(e.b.newCQ(n), e.b.newCQ(n))
	connect(t, a, b)
	write := func() {
		a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	}
	// mlx5_arm_cq at consumer index 0, as far as the record: the register write that tells
	// the device is held back, standing for a doorbell the device has not seen yet.
	w := mlx5.ArmWord(scq.sn, false, 0)
	scq.db.Store(mlx5.CQArmDB, w)
	for range n {
		write()
		scq.poll()
	}
	for range n {
		write()
	}
	waitUntil(t, "a full ring past the polled entries", func() bool { return e.a.dev.Stats().CQEsWritten == 2*n })
	watcherPasses(t, e.a.dev, 3)
	if ev := scq.events.Load(); ev != 0 {
		t.Fatalf("%d events before the arm", ev)
	}
	// The device reads the register now: 2n entries lie past the arm's index 0.
	scq.page.Store64(mlx5.CQDoorbellOffset, mlx5.CQDoorbellValue(scq.cq.CQN(), w))
	waitUntil(t, "the late arm's event", func() bool { return scq.events.Load() == 1 })
	for range n {
		scq.poll()
	}
	// A consumer index ahead of the producer has nothing past it: armed, no event yet.
	scq.sn++
	w = mlx5.ArmWord(scq.sn, false, 2*n+1)
	scq.db.Store(mlx5.CQArmDB, w)
	scq.page.Store64(mlx5.CQDoorbellOffset, mlx5.CQDoorbellValue(scq.cq.CQN(), w))
	watcherPasses(t, e.a.dev, 3)
	if ev := scq.events.Load(); ev != 1 {
		t.Fatalf("%d events for an arm at an index ahead of the producer, want none yet", ev-1)
	}
}

// postRecvFor posts one receive on q (helper for loops).
func (q *qpEnd) postRecvFor(t *testing.T) { q.postRecv(0, 64) }

// A CQ whose consumer index does not move overruns: the device raises the CQ error once and
// stops writing to it.
func TestCQOverrun(t *testing.T) {
	e := newEnv(t)
	scq := e.a.newCQ(4)
	a := e.a.newQP(scq, e.a.newCQ(4))
	b := e.b.newQP(e.b.newCQ(4), e.b.newCQ(4))
	connect(t, a, b)
	for i := 0; i < 4; i++ {
		a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	}
	waitUntil(t, "4 CQEs", func() bool { return e.a.dev.Stats().CQEsWritten == 4 })
	if scq.errs.Load() != 0 || scq.cq.Errored() {
		t.Fatal("CQ error before the CQ was full")
	}
	a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	waitUntil(t, "CQ error", func() bool { return scq.errs.Load() == 1 })
	if !scq.cq.Errored() {
		t.Fatal("CQ not in error after an overrun")
	}
	// The four CQEs written before are intact and in order.
	for i := 0; i < 4; i++ {
		wc := checkCQE(t, scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
		if wc.WQECounter != uint16(i) {
			t.Fatalf("CQE %d for wqe %d", i, wc.WQECounter)
		}
	}
	a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	watcherPasses(t, e.a.dev, 5)
	if !scq.empty() || scq.errs.Load() != 1 {
		t.Fatal("the device kept writing to (or re-reported) an overrun CQ")
	}
}

// The owner bit flips on every pass over the ring: many more CQEs than entries, each polled
// by the provider's ownership check.
func TestCQWrap(t *testing.T) {
	e := newEnv(t)
	scq := e.a.newCQ(4)
	a := e.a.newQP(scq, e.a.newCQ(4))
	b := e.b.newQP(e.b.newCQ(4), e.b.newCQ(4))
	connect(t, a, b)
	for i := 0; i < 100; i++ {
		p := a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
		ce := scq.poll()
		if ce.Owner() != uint8(i/4)&1 {
			t.Fatalf("CQE %d owner %d", i, ce.Owner())
		}
		if wc := checkCQE(t, ce, mlx5.CQEReq, mlx5.WCSuccess); wc.WQECounter != p.WQEIndex {
			t.Fatalf("CQE %d for wqe %d, want %d", i, wc.WQECounter, p.WQEIndex)
		}
	}
}
