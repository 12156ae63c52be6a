package nic

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

// These tests destroy QPs and CQs while the device and the RC engines may still be working on
// them, and unmap the objects' memory as soon as Destroy returns, as a process does when it
// frees its rings. A device goroutine that reads a ring or doorbell record afterwards hits an
// unmapped page: the SIGSEGV kills the test binary, which is the failure. Everything the
// device may read after the objects are gone (UAR pages, registered memory) stays mapped.

// raceMem is one private anonymous mapping, unmapped by the test at a chosen moment.
type raceMem struct{ b []byte }

func mapRace(t testing.TB, n int) raceMem {
	t.Helper()
	n = (n + 4095) &^ 4095
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	return raceMem{b}
}

func (m raceMem) unmap(t testing.TB) {
	t.Helper()
	if err := unix.Munmap(m.b); err != nil {
		t.Fatal(err)
	}
}

// raceCQ is a CQ whose CQE buffer (page 0) and doorbell record (page 1) share one mapping.
type raceCQ struct {
	cq   *CQ
	mem  raceMem
	ring *mlx5.CQ
	db   mlx5.DBRec
	errs atomic.Int32
}

const raceCQEs = 64

func newRaceCQ(t testing.TB, d *Device, u *UAR) *raceCQ {
	t.Helper()
	c := &raceCQ{mem: mapRace(t, 2*4096)}
	var err error
	if c.ring, err = mlx5.NewCQ(c.mem.b[:raceCQEs*64], raceCQEs, 64); err != nil {
		t.Fatal(err)
	}
	c.ring.Init()
	if c.db, err = mlx5.NewDBRec(c.mem.b[4096 : 4096+8]); err != nil {
		t.Fatal(err)
	}
	c.cq, err = d.CreateCQ(CQConfig{Buf: addrOf(c.mem.b), CQEs: raceCQEs, CQESize: 64,
		DBRec: addrOf(c.mem.b[4096:]), UAR: u, OnError: func() { c.errs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *raceCQ) destroy(t testing.TB) {
	t.Helper()
	if err := c.cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	c.mem.unmap(t)
}

// raceQP is a QP whose work queue buffer (pages 0-1) and doorbell record (page 2) share one
// mapping.
type raceQP struct {
	qp   *QP
	mem  raceMem
	sq   *mlx5.SQ
	rq   *mlx5.RQ
	db   mlx5.DBRec
	bf   *mlx5.BFReg
	errs atomic.Int32
}

func newRaceQP(t testing.TB, d *Device, u *UAR, bfreg int, scq, rcq *raceCQ) *raceQP {
	t.Helper()
	const rqBytes = rqWQEs << rqShift
	q := &raceQP{mem: mapRace(t, 3*4096)}
	var err error
	if q.sq, err = mlx5.NewSQ(q.mem.b[rqBytes:rqBytes+sqBBs*64], sqBBs); err != nil {
		t.Fatal(err)
	}
	if q.rq, err = mlx5.NewRQ(q.mem.b[:rqBytes], rqWQEs, rqShift); err != nil {
		t.Fatal(err)
	}
	if q.db, err = mlx5.NewDBRec(q.mem.b[2*4096 : 2*4096+8]); err != nil {
		t.Fatal(err)
	}
	page, err := mlx5.NewUARPage(u.Mem())
	if err != nil {
		t.Fatal(err)
	}
	first, _ := SQDoorbellOffsets(bfreg)
	if q.bf, err = mlx5.NewBFReg(page, mlx5.Bfreg{Index: uint32(bfreg), Offset: first, BufSize: bfregSize / 2}); err != nil {
		t.Fatal(err)
	}
	q.qp, err = d.CreateQP(QPConfig{PD: 1, SendCQ: scq.cq, RecvCQ: rcq.cq, Buf: addrOf(q.mem.b),
		RQWQEs: rqWQEs, RQWQEShift: rqShift, SQWQEBBs: sqBBs, SQOffset: rqBytes,
		DBRec: addrOf(q.mem.b[2*4096:]), UAR: u, Bfreg: bfreg,
		OnError: func(mlx5.WCStatus) { q.errs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// destroy does what the emulated kernel does on destroy_qp (RESET, then destroy) and unmaps
// the QP's memory at once.
func (q *raceQP) destroy(t testing.TB) {
	t.Helper()
	if q.qp.State() != QPSReset {
		if err := q.qp.Modify(QPSReset, QPAttr{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	q.mem.unmap(t)
}

func raceAttr(remoteQPN uint32, remote netip.Addr) QPAttr {
	return QPAttr{Port: 1, RemoteQPN: remoteQPN, RemoteAddr: remote, PathMTU: 1024,
		SQPSN: 1, RQPSN: 1, Timeout: 1, RetryCnt: 1, RNRRetry: 1, MinRNR: 1, MaxRDAtom: 4, MaxDestRD: 4,
		Access: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic}
}

func toRTS(t testing.TB, q *QP, attr QPAttr) {
	t.Helper()
	for _, st := range []QPState{QPSInit, QPSRTR, QPSRTS} {
		if err := q.Modify(st, attr); err != nil {
			t.Fatal(err)
		}
	}
}

// raceSeed returns the seed of a randomized test: NIC_RACE_SEED when set, else the time. It is
// written to stderr at once, since a crash (the failure these tests look for) loses the
// test's log.
func raceSeed(t testing.TB) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("NIC_RACE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("NIC_RACE_SEED: %v", err)
		}
	}
	fmt.Fprintf(os.Stderr, "%s: seed %d (NIC_RACE_SEED=%d reproduces it)\n", t.Name(), seed, seed)
	return seed
}

// raceLink lets a port follow a fabric endpoint's carrier.
type raceLink struct{ *fabric.Endpoint }

func (l raceLink) OnLinkState(fn func(bool)) { l.Watch(func(e fabric.LinkEvent) { fn(e.Up) }) }

// waitPasses waits until the watcher completed n more passes (failure guard: waitFor).
func waitPasses(t testing.TB, d *Device, n uint64) {
	t.Helper()
	start := d.Stats().Passes
	deadline := time.Now().Add(waitFor)
	for d.Stats().Passes < start+n {
		if time.Now().After(deadline) {
			t.Fatalf("watcher made no progress within %v", waitFor)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// The RC engine delivers completions and QP errors outside its lock, so one it queued before a
// modify to RESET or a destroy can reach the device after either returned. A transport that
// hands the test the engine's Host lets the test play exactly that late delivery: every
// callback after RESET (also once the QP is back in INIT) or Destroy must be ignored — no
// state change, no error callback, no CQE, no receive popped — and, after Destroy, the watcher
// must never look at the QP's (now unmapped) doorbell record again.
func TestLateEngineCallbacks(t *testing.T) {
	hosts := make(chan rc.Host, 1)
	f := fabric.New(fabric.WithSeed(1))
	ep, err := f.Attach(addrA)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Name: "emlx5_late", Ports: []PortConfig{{Link: raceLink{ep}}},
		NewTransport: func(h rc.Host) rc.Transport { hosts <- h; return rc.New(h) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		_ = f.Close()
	})
	u, err := d.AllocUAR()
	if err != nil {
		t.Fatal(err)
	}
	late := func(h rc.Host, pop bool) {
		h.QPError(rc.StatusRetryExcErr)
		h.SendCompleted(rc.SendCompletion{Index: 0, Op: rc.OpSend, Status: rc.StatusWRFlushErr, Signaled: true})
		h.RecvCompleted(rc.RecvCompletion{Index: 0, Status: rc.StatusWRFlushErr})
		if _, ok := h.PopRecv(); pop && ok {
			t.Error("PopRecv yielded a receive of a QP in RESET or destroyed")
		}
		h.QPError(rc.StatusLocAccessErr)
	}
	const (
		afterReset   = iota // late callbacks while the QP is in RESET
		afterReinit         // ... after it went RESET → INIT again
		afterDestroy        // ... after RESET and Destroy, its memory unmapped
	)
	for round, mode := range []int{afterReset, afterReinit, afterDestroy, afterDestroy} {
		cq := newRaceCQ(t, d, u)
		q := newRaceQP(t, d, u, 1, cq, cq)
		h := <-hosts
		attr := raceAttr(0x999, addrB)
		toRTS(t, q.qp, attr)
		// Receives posted (the record says so): a QP in ERR would have them flushed by the
		// watcher, which reads the record to find them.
		q.db.SetRecvCounter(3)
		if err := q.qp.Modify(QPSReset, QPAttr{}); err != nil {
			t.Fatal(err)
		}
		switch mode {
		case afterReset, afterReinit:
			want := QPSReset
			if mode == afterReinit {
				q.db.SetRecvCounter(0) // software restarts its counters after a reset
				if err := q.qp.Modify(QPSInit, attr); err != nil {
					t.Fatal(err)
				}
				want = QPSInit
			}
			late(h, mode == afterReset)
			if s := q.qp.State(); s != want {
				t.Fatalf("round %d: a QP error of the engine's previous incarnation moved the QP from %v to %v", round, want, s)
			}
			if err := q.qp.Destroy(); err != nil {
				t.Fatal(err)
			}
			q.mem.unmap(t)
		case afterDestroy:
			if err := q.qp.Destroy(); err != nil {
				t.Fatal(err)
			}
			q.mem.unmap(t)
			late(h, true)
			// The watcher must not flush receives of the destroyed QP: its doorbell record
			// is unmapped, so reading it would crash the test.
			waitPasses(t, d, 3)
		}
		if n := q.errs.Load(); n != 0 {
			t.Fatalf("round %d: %d QP error callbacks after RESET/destroy", round, n)
		}
		var e mlx5.CQE64
		if cq.ring.Peek(&e) {
			t.Fatalf("round %d: a late completion wrote a CQE (opcode %#x) after RESET/destroy", round, e.Opcode())
		}
		cq.destroy(t)
	}
}

// Real engines, real asynchronous errors: QP pairs on two devices exchange traffic with short
// timeouts and one retry while the link goes down (or packets vanish), so the engines raise
// RETRY_EXC and flush from their timer goroutines, while the test resets and destroys the QPs
// and CQs at a random moment and unmaps their memory at once. Any device access after
// Destroy returned crashes the binary.
func TestDestroyDuringAsyncErrors(t *testing.T) {
	seed := raceSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	rounds := 600
	if testing.Short() {
		rounds = 100
	}
	f := fabric.New(fabric.WithSeed(seed))
	ea, err := f.Attach(addrA)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := f.Attach(addrB)
	if err != nil {
		t.Fatal(err)
	}
	da, err := New(Config{Name: "emlx5_ra", Ports: []PortConfig{{Link: raceLink{ea}, MTU: 1024}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := New(Config{Name: "emlx5_rb", Ports: []PortConfig{{Link: raceLink{eb}, MTU: 1024}}})
	if err != nil {
		t.Fatal(err)
	}
	data := mapRace(t, memSize)
	t.Cleanup(func() {
		for _, d := range []*Device{da, db} {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}
		_ = f.Close()
		data.unmap(t)
	})
	ua, err := da.AllocUAR()
	if err != nil {
		t.Fatal(err)
	}
	ub, err := db.AllocUAR()
	if err != nil {
		t.Fatal(err)
	}
	access := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	mra, err := da.RegisterMR(1, addrOf(data.b), memSize/2, access)
	if err != nil {
		t.Fatal(err)
	}
	mrb, err := db.RegisterMR(1, addrOf(data.b[memSize/2:]), memSize/2, access)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < rounds; round++ {
		ea.SetLinkUp(true)
		ea.Faults(fabric.TX).Reset()
		acq, bcq := newRaceCQ(t, da, ua), newRaceCQ(t, db, ub)
		a := newRaceQP(t, da, ua, 1, acq, acq)
		b := newRaceQP(t, db, ub, 1, bcq, bcq)
		toRTS(t, a.qp, raceAttr(b.qp.QPN(), addrB))
		toRTS(t, b.qp, raceAttr(a.qp.QPN(), addrA))
		// Receives on both sides (b takes SENDs; a's stay posted, to be flushed in ERR).
		for _, q := range []*raceQP{a, b} {
			base := addrOf(data.b)
			lkey := mra.LKey
			if q == b {
				base, lkey = addrOf(data.b[memSize/2:]), mrb.LKey
			}
			for i := 0; i < 4; i++ {
				if _, err := q.rq.Post([]mlx5.DataSeg{{ByteCount: 4096, LKey: lkey, Addr: base + uint64(i)*4096}}); err != nil {
					t.Fatal(err)
				}
			}
			q.rq.Ring(q.db)
		}
		// Cut the path before or after the doorbell, or not at all (some rounds destroy QPs
		// with traffic in flight rather than in error).
		mode := rnd.IntN(4)
		cut := func() {
			switch mode {
			case 0:
				ea.SetLinkUp(false)
			case 1:
				ea.Faults(fabric.TX).SetBlackhole(true)
			case 2:
				ea.Faults(fabric.TX).DropNext(1 + rnd.IntN(20))
			}
		}
		cutFirst := rnd.IntN(2) == 0
		if cutFirst {
			cut()
		}
		// Up to 48 WRs from a (SENDs, WRITEs and READs of up to 16 KiB), mostly unsignaled:
		// an error flushes them all, each with a CQE, so the engine's delivery of the error
		// is a long batch of completions ending with the QP error.
		n := 1 + rnd.IntN(48)
		var last mlx5.Posted
		for i := 0; i < n; i++ {
			bl := a.sq.Begin()
			op := mlx5.OpcodeRDMAWrite
			size := 1 + rnd.IntN(16<<10)
			switch rnd.IntN(3) {
			case 0:
				op, size = mlx5.OpcodeSend, 1+rnd.IntN(4096)
			case 1:
				op = mlx5.OpcodeRDMARead
			}
			if op != mlx5.OpcodeSend {
				bl.Raddr(mlx5.RaddrSeg{RemoteAddr: addrOf(data.b[memSize/2:]), RKey: mrb.RKey})
			}
			bl.Data(mlx5.DataSeg{ByteCount: uint32(size), LKey: mra.LKey, Addr: addrOf(data.b[64<<10:])})
			var fl uint8
			if rnd.IntN(4) == 0 {
				fl = mlx5.CtrlCQUpdate
			}
			if last, err = bl.Finish(mlx5.CtrlSeg{Opcode: op, QPN: a.qp.QPN(), FMCESE: fl}); err != nil {
				t.Fatal(err)
			}
		}
		a.bf.Ring(a.sq, a.db, n, last, false)
		if !cutFirst {
			cut()
		}
		if rnd.IntN(3) != 0 {
			// Destroy as soon as the first completion appears: the engine is then in the
			// middle of delivering its batch (a retry takes 8 µs at Timeout 1).
			var e mlx5.CQE64
			deadline := time.Now().Add(5 * time.Millisecond)
			for !acq.ring.Peek(&e) && time.Now().Before(deadline) {
				runtime.Gosched()
			}
		} else if w := rnd.IntN(1200); w > 100 {
			time.Sleep(time.Duration(w) * time.Microsecond)
		}
		order := []*raceQP{a, b}
		if rnd.IntN(2) == 0 {
			order[0], order[1] = b, a
		}
		for _, q := range order {
			q.destroy(t)
		}
		acq.destroy(t)
		bcq.destroy(t)
	}
	ea.SetLinkUp(true)
	waitPasses(t, da, 3)
	waitPasses(t, db, 3)
}

// CQs sharing a UAR page with a CQ that is armed continuously: every arm doorbell makes the
// watcher scan the arm doorbell records of the page's other CQs. Destroying those CQs and
// unmapping their memory at once must never leave the scan reading a destroyed CQ's record.
func TestCQDestroyDuringArmScan(t *testing.T) {
	seed := raceSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 0xc0))
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	f := fabric.New(fabric.WithSeed(seed))
	ep, err := f.Attach(addrA)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Name: "emlx5_arm", Ports: []PortConfig{{Link: raceLink{ep}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		_ = f.Close()
	})
	u, err := d.AllocUAR()
	if err != nil {
		t.Fatal(err)
	}
	page, err := mlx5.NewUARPage(u.Mem())
	if err != nil {
		t.Fatal(err)
	}
	keeper := newRaceCQ(t, d, u)
	defer keeper.destroy(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for sn := uint32(0); ; sn++ {
			select {
			case <-stop:
				return
			default:
			}
			keeper.ring.Arm(keeper.db, page, keeper.cq.CQN(), sn&3, false)
			if sn%64 == 0 {
				time.Sleep(time.Microsecond)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for round := 0; round < rounds; round++ {
		cqs := make([]*raceCQ, 4+rnd.IntN(28))
		for i := range cqs {
			cqs[i] = newRaceCQ(t, d, u)
			if rnd.IntN(2) == 0 {
				// Armed through the record only, so the scan sees a change.
				cqs[i].db.Store(mlx5.CQArmDB, uint32(rnd.IntN(4))<<28)
			}
		}
		if rnd.IntN(2) == 0 {
			waitPasses(t, d, 1)
		}
		for _, c := range cqs {
			c.destroy(t)
		}
	}
}
