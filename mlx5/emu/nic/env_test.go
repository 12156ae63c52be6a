package nic

import (
	"bytes"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc/rctest"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// The tests play the provider: they lay rings out in mmapped memory as libmlx5 does, write
// WQEs with package mlx5's builders, ring through the UAR page with its doorbell sequence and
// poll CQEs with its CQ code, against two devices joined by an in-process link pair.

var waitFor = 10 * time.Second // failure guard only

// env is two devices over a link pair, and the memory the "provider" mapped.
type env struct {
	t    testing.TB
	stop func() // stops the links' delivery
	a, b *testHost
	mu   sync.Mutex
	mem  [][]byte
}

type testHost struct {
	env  *env
	dev  *Device
	uar  *UAR
	page mlx5.UARPage
	next int // next free bfreg on uar
	pd   uint32

	portEvents chan bool
}

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

// newEnv joins two hosts through the in-process fabric (package fabric, no faults); with
// NIC_TEST_LINK=rctest it uses the RC package's minimal link pair instead, to tell a fabric
// problem from a device one.
func newEnv(t testing.TB) *env {
	t.Helper()
	if os.Getenv("NIC_TEST_LINK") == "rctest" {
		pair := rctest.NewPair(addrA, addrB)
		e := newEnvLinks(t, pair.A, pair.B, pair.Stop)
		pair.Start()
		return e
	}
	e, _, _, _ := newFabricEnv(t, 1)
	return e
}

// newEnvLinks builds the two hosts on the given links; stop ends the links' delivery.
func newEnvLinks(t testing.TB, la, lb roce.Link, stop func()) *env {
	t.Helper()
	e := &env{t: t, stop: stop}
	e.a = e.newHost("a", la)
	e.b = e.newHost("b", lb)
	t.Cleanup(e.close)
	return e
}

func (e *env) newHost(name string, l roce.Link) *testHost {
	e.t.Helper()
	h := &testHost{env: e, pd: 1, portEvents: make(chan bool, 16)}
	d, err := New(Config{Name: "emlx5_" + name, Ports: []PortConfig{{Link: l, MTU: 1024}},
		OnPortState: func(_ int, up bool) { h.portEvents <- up }})
	if err != nil {
		e.t.Fatal(err)
	}
	h.dev = d
	h.newUAR()
	return h
}

func (h *testHost) newUAR() {
	t := h.env.t
	u, err := h.dev.AllocUAR()
	if err != nil {
		t.Fatal(err)
	}
	p, err := mlx5.NewUARPage(u.Mem())
	if err != nil {
		t.Fatal(err)
	}
	h.uar, h.page, h.next = u, p, 1 // bfreg 0 rings 8-byte doorbells only; start at 1
}

func (e *env) close() {
	e.stop()
	for _, h := range []*testHost{e.a, e.b} {
		if err := h.dev.Close(); err != nil {
			e.t.Errorf("close %s: %v", h.dev.Name(), err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.mem {
		_ = unix.Munmap(m)
	}
	e.mem = nil
}

// alloc maps n zeroed bytes, page-aligned, released after the devices close.
func (e *env) alloc(n int) []byte {
	e.t.Helper()
	n = (n + 4095) &^ 4095
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.mem = append(e.mem, m)
	e.mu.Unlock()
	return m
}

// cqEnd is the provider's view of a CQ plus the device's.
type cqEnd struct {
	t      testing.TB
	cq     *CQ
	ring   *mlx5.CQ
	db     mlx5.DBRec
	page   mlx5.UARPage
	sn     uint32
	events atomic.Int32
	errs   atomic.Int32
}

func (h *testHost) newCQ(n int) *cqEnd {
	t := h.env.t
	t.Helper()
	buf := h.env.alloc(n * 64)
	dbm := h.env.alloc(64)
	c := &cqEnd{t: t, page: h.page}
	var err error
	if c.ring, err = mlx5.NewCQ(buf[:n*64], n, 64); err != nil {
		t.Fatal(err)
	}
	c.ring.Init()
	if c.db, err = mlx5.NewDBRec(dbm[:8]); err != nil {
		t.Fatal(err)
	}
	c.cq, err = h.dev.CreateCQ(CQConfig{Buf: addrOf(buf), CQEs: n, CQESize: 64, DBRec: addrOf(dbm), UAR: h.uar,
		OnComp: func() { c.events.Add(1) }, OnError: func() { c.errs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// poll waits for the next CQE.
func (c *cqEnd) poll() mlx5.CQE64 {
	c.t.Helper()
	var e mlx5.CQE64
	deadline := time.Now().Add(waitFor)
	for !c.ring.Poll(&e) {
		if time.Now().After(deadline) {
			c.t.Fatalf("no CQE on cq %#x within %v", c.cq.CQN(), waitFor)
		}
		time.Sleep(20 * time.Microsecond)
	}
	c.ring.UpdateCI(c.db)
	return e
}

// pollNoFatal waits for the next CQE without failing the test (for other goroutines); nil on
// timeout.
func (c *cqEnd) pollNoFatal() *mlx5.CQE64 {
	var e mlx5.CQE64
	deadline := time.Now().Add(waitFor)
	for !c.ring.Poll(&e) {
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(20 * time.Microsecond)
	}
	c.ring.UpdateCI(c.db)
	return &e
}

// empty reports that no CQE is ready.
func (c *cqEnd) empty() bool {
	var e mlx5.CQE64
	return !c.ring.Peek(&e)
}

func (c *cqEnd) arm(solicited bool) {
	c.ring.Arm(c.db, c.page, c.cq.CQN(), c.sn, solicited)
}

// qpEnd is one RC QP as the provider sees it.
type qpEnd struct {
	h        *testHost
	t        testing.TB
	qp       *QP
	scq, rcq *cqEnd
	sq       *mlx5.SQ
	rq       *mlx5.RQ
	db       mlx5.DBRec
	bf       *mlx5.BFReg
	mem      []byte // registered memory
	mr       *MR
	errs     chan mlx5.WCStatus
	events   chan QPEvent
}

const (
	sqBBs   = 64
	rqWQEs  = 16
	rqShift = 6 // 4 scatter entries per receive
	memSize = 1 << 20
)

func (h *testHost) newQP(scq, rcq *cqEnd) *qpEnd {
	h.env.t.Helper()
	if h.next >= BfregsPerUAR {
		h.newUAR()
	}
	bfreg := h.next
	h.next++
	return h.newQPOn(scq, rcq, h.uar, bfreg, nil)
}

// newQPOn creates a QP ringing register bfreg of u. With a non-nil bf the register is
// shared (SharedBfreg) and rung through bf, the handle every QP on it shares.
func (h *testHost) newQPOn(scq, rcq *cqEnd, u *UAR, bfreg int, bf *mlx5.BFReg) *qpEnd {
	t := h.env.t
	t.Helper()
	rqBytes := rqWQEs << rqShift
	buf := h.env.alloc(rqBytes + sqBBs*64)
	dbm := h.env.alloc(64)
	q := &qpEnd{h: h, t: t, scq: scq, rcq: rcq, errs: make(chan mlx5.WCStatus, 4), events: make(chan QPEvent, 4)}
	var err error
	if q.sq, err = mlx5.NewSQ(buf[rqBytes:rqBytes+sqBBs*64], sqBBs); err != nil {
		t.Fatal(err)
	}
	q.sq.MaxInline = 256
	if q.rq, err = mlx5.NewRQ(buf[:rqBytes], rqWQEs, rqShift); err != nil {
		t.Fatal(err)
	}
	if q.db, err = mlx5.NewDBRec(dbm[:8]); err != nil {
		t.Fatal(err)
	}
	q.bf = bf
	if bf == nil {
		page, err := mlx5.NewUARPage(u.Mem())
		if err != nil {
			t.Fatal(err)
		}
		first, _ := SQDoorbellOffsets(bfreg)
		if q.bf, err = mlx5.NewBFReg(page, mlx5.Bfreg{Index: uint32(bfreg), Offset: first, BufSize: bfregSize / 2}); err != nil {
			t.Fatal(err)
		}
	}
	q.qp, err = h.dev.CreateQP(QPConfig{PD: h.pd, SendCQ: scq.cq, RecvCQ: rcq.cq, Buf: addrOf(buf),
		RQWQEs: rqWQEs, RQWQEShift: rqShift, SQWQEBBs: sqBBs, SQOffset: uint64(rqBytes), DBRec: addrOf(dbm),
		UAR: u, Bfreg: bfreg, SharedBfreg: bf != nil, OnError: func(s mlx5.WCStatus) { q.errs <- s },
		OnAsyncEvent: func(ev QPEvent) { q.events <- ev }})
	if err != nil {
		t.Fatal(err)
	}
	q.mem = h.env.alloc(memSize)
	q.mr, err = h.dev.RegisterMR(h.pd, addrOf(q.mem), memSize,
		AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// pairQPs creates one QP per host (each with its own send and receive CQ) and connects them.
func (e *env) pairQPs() (a, b *qpEnd) {
	e.t.Helper()
	a = e.a.newQP(e.a.newCQ(64), e.a.newCQ(64))
	b = e.b.newQP(e.b.newCQ(64), e.b.newCQ(64))
	connect(e.t, a, b)
	return a, b
}

// attrsFor connects local to remote. The ACK timeout runs on the real clock and no test using
// these attributes loses packets, so any timeout is the machine stalling: 268 ms (Timeout 16)
// times 8 tries leaves 2 s of stall before a spurious RETRY_EXC_ERR, where 67 ms left 0.5 s.
func attrsFor(local, remote *qpEnd) QPAttr {
	return QPAttr{Port: 1, RemoteQPN: remote.qp.QPN(), RemoteAddr: remote.h.dev.Port(1).Addr(),
		PathMTU: 1024, SQPSN: 100, RQPSN: 100, Timeout: 16, RetryCnt: 7, RNRRetry: 7, MinRNR: 1,
		MaxRDAtom: 4, MaxDestRD: 4, Access: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic}
}

func connect(t testing.TB, a, b *qpEnd) {
	t.Helper()
	for _, st := range []QPState{QPSInit, QPSRTR, QPSRTS} {
		if err := a.qp.Modify(st, attrsFor(a, b)); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.Modify(st, attrsFor(b, a)); err != nil {
			t.Fatal(err)
		}
	}
}

// wqe describes a send WR for build.
type wqe struct {
	op        mlx5.Opcode
	local     []mlx5.DataSeg
	inline    []byte
	raddr     uint64
	rkey      uint32
	imm       uint32
	atomic    mlx5.AtomicSeg
	signaled  bool
	solicited bool
}

// build writes the WQE and returns what Ring needs; nothing is published yet.
func (q *qpEnd) build(w wqe) mlx5.Posted {
	q.t.Helper()
	b := q.sq.Begin()
	switch w.op {
	case mlx5.OpcodeRDMAWrite, mlx5.OpcodeRDMAWriteImm, mlx5.OpcodeRDMARead, mlx5.OpcodeAtomicCS, mlx5.OpcodeAtomicFA:
		b.Raddr(mlx5.RaddrSeg{RemoteAddr: w.raddr, RKey: w.rkey})
	}
	if w.op == mlx5.OpcodeAtomicCS || w.op == mlx5.OpcodeAtomicFA {
		b.Atomic(w.atomic)
	}
	if w.inline != nil {
		if err := b.Inline(w.inline); err != nil {
			q.t.Fatal(err)
		}
	}
	for _, d := range w.local {
		b.Data(d)
	}
	var fl uint8
	if w.signaled {
		fl |= mlx5.CtrlCQUpdate
	}
	if w.solicited {
		fl |= mlx5.CtrlSolicited
	}
	p, err := b.Finish(mlx5.CtrlSeg{Opcode: w.op, QPN: q.qp.QPN(), FMCESE: fl, Imm: w.imm})
	if err != nil {
		q.t.Fatal(err)
	}
	return p
}

// post builds and rings one WQE.
func (q *qpEnd) post(w wqe) mlx5.Posted {
	q.t.Helper()
	p := q.build(w)
	q.bf.Ring(q.sq, q.db, 1, p, w.inline != nil)
	return p
}

// seg is a gather/scatter entry over q's registered memory.
func (q *qpEnd) seg(off, n int) mlx5.DataSeg {
	return mlx5.DataSeg{ByteCount: uint32(n), LKey: q.mr.LKey, Addr: addrOf(q.mem) + uint64(off)}
}

func (q *qpEnd) va(off int) uint64 { return addrOf(q.mem) + uint64(off) }

// postRecv posts one receive over q.mem[off:off+n].
func (q *qpEnd) postRecv(off, n int) {
	q.t.Helper()
	if _, err := q.rq.Post([]mlx5.DataSeg{q.seg(off, n)}); err != nil {
		q.t.Fatal(err)
	}
	q.rq.Ring(q.db)
}

// waitUntil polls cond until it holds or the guard expires.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// watcherPasses waits until the device's watcher has completed n more full passes, so a test
// knows it looked at every register at least n-1 times since the call.
func watcherPasses(t testing.TB, d *Device, n uint64) {
	t.Helper()
	start := d.Stats().Passes
	waitUntil(t, "watcher passes", func() bool { return d.Stats().Passes >= start+n })
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func checkCQE(t *testing.T, e mlx5.CQE64, wantOp uint8, wantStatus mlx5.WCStatus) mlx5.WC {
	t.Helper()
	wc := e.Completion()
	if e.Opcode() != wantOp || wc.Status != wantStatus {
		t.Fatalf("CQE opcode %d status %v (syndrome %#x), want opcode %d status %v", e.Opcode(), wc.Status, e.Syndrome, wantOp, wantStatus)
	}
	return wc
}

var _ = bytes.Equal
