package rc

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/internal/leakcheck"
	"github.com/shift-rdma/shift/mlx5/emu/rc/rctest"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

func TestMain(m *testing.M) {
	// Close must leave no timer callback, delivery or fabric goroutine of this module
	// behind.
	leakcheck.Main(m)
}

// region is a registered memory region of the test host.
type region struct {
	va     uint64
	buf    []byte
	access Access
}

// testHost is the NIC side of one QP: memory regions, a receive queue, recorded completions.
type testHost struct {
	mu      sync.Mutex
	regions map[uint32]region
	recvs   []Recv
	nextRx  uint16
	sends   []SendCompletion
	recvc   []RecvCompletion
	qpErrs  []Status
	changed chan struct{}
}

func newTestHost() *testHost {
	return &testHost{regions: map[uint32]region{}, changed: make(chan struct{}, 1)}
}

// register makes a region of n bytes at va, 8-byte aligned, and returns its bytes.
func (h *testHost) register(rkey uint32, va uint64, n int, acc Access) []byte {
	words := make([]uint64, (n+7)/8)
	buf := unsafeBytes(words)[:n]
	h.mu.Lock()
	h.regions[rkey] = region{va: va, buf: buf, access: acc}
	h.mu.Unlock()
	return buf
}

func (h *testHost) RemoteMemory(rkey uint32, va uint64, length int, acc Access) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.regions[rkey]
	if !ok {
		return nil, fmt.Errorf("rkey %#x: %w", rkey, ErrAccess)
	}
	if va < r.va || va+uint64(length) > r.va+uint64(len(r.buf)) {
		return nil, fmt.Errorf("rkey %#x range: %w", rkey, ErrAccess)
	}
	if r.access&acc != acc {
		return nil, fmt.Errorf("rkey %#x rights: %w", rkey, ErrAccess)
	}
	off := va - r.va
	return r.buf[off : off+uint64(length)], nil
}

// postRecv queues a receive with the given scatter list and returns its index.
func (h *testHost) postRecv(sg ...[]byte) uint16 {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.nextRx
	h.nextRx++
	h.recvs = append(h.recvs, Recv{Index: i, Scatter: sg})
	return i
}

func (h *testHost) PopRecv() (Recv, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.recvs) == 0 {
		return Recv{}, false
	}
	r := h.recvs[0]
	h.recvs = h.recvs[1:]
	return r, true
}

func (h *testHost) poke() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *testHost) SendCompleted(c SendCompletion) {
	h.mu.Lock()
	h.sends = append(h.sends, c)
	h.mu.Unlock()
	h.poke()
}

func (h *testHost) RecvCompleted(c RecvCompletion) {
	h.mu.Lock()
	h.recvc = append(h.recvc, c)
	h.mu.Unlock()
	h.poke()
}

func (h *testHost) QPError(s Status) {
	h.mu.Lock()
	h.qpErrs = append(h.qpErrs, s)
	h.mu.Unlock()
	h.poke()
}

func (h *testHost) sendC() []SendCompletion {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]SendCompletion(nil), h.sends...)
}

func (h *testHost) recvC() []RecvCompletion {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]RecvCompletion(nil), h.recvc...)
}

func (h *testHost) errs() []Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Status(nil), h.qpErrs...)
}

// env is two connected QPs, A (requester in most tests) and B, over a link pair pumped by the
// test, on a manual clock.
type env struct {
	t      *testing.T
	clk    *clock.Manual
	start  time.Time
	pair   *rctest.Pair
	a, b   *QP
	ha, hb *testHost
	ca, cb Config
}

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

func baseConfigs(pair *rctest.Pair, clk clock.Clock) (Config, Config) {
	a := Config{
		LocalQPN: 0x11, RemoteQPN: 0x22, RemoteIP: ipB, Link: pair.A, PathMTU: 1024,
		SQPSN: 100, RQPSN: 5000, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12,
		MaxRDAtomic: 4, MaxDestRDAtomic: 4,
		RemoteAccess: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic, Clock: clk,
	}
	b := a
	b.LocalQPN, b.RemoteQPN, b.RemoteIP, b.Link = 0x22, 0x11, ipA, pair.B
	b.SQPSN, b.RQPSN = 5000, 100
	return a, b
}

func connect(t testing.TB, q *QP, cfg Config) {
	t.Helper()
	for _, s := range []State{StateInit, StateRTR, StateRTS} {
		if err := q.Modify(s, cfg); err != nil {
			t.Fatalf("modify to %v: %v", s, err)
		}
	}
}

func newEnv(t *testing.T, mod func(a, b *Config)) *env {
	t.Helper()
	e := &env{t: t, start: time.Unix(1_700_000_000, 0)}
	e.clk = clock.NewManual(e.start)
	e.pair = rctest.NewPair(ipA, ipB)
	e.ca, e.cb = baseConfigs(e.pair, e.clk)
	if mod != nil {
		mod(&e.ca, &e.cb)
	}
	e.ha, e.hb = newTestHost(), newTestHost()
	e.a, e.b = New(e.ha), New(e.hb)
	e.pair.A.SetReceiver(e.a.HandlePacket)
	e.pair.B.SetReceiver(e.b.HandlePacket)
	connect(t, e.a, e.ca)
	connect(t, e.b, e.cb)
	t.Cleanup(func() {
		e.a.Close()
		e.b.Close()
		e.pair.A.Close()
		e.pair.B.Close()
	})
	return e
}

func (e *env) post(q *QP, wr WorkRequest) {
	e.t.Helper()
	if err := q.Post(&wr); err != nil {
		e.t.Fatalf("post %v: %v", wr.Op, err)
	}
}

// settle delivers packets until none are queued, without moving the clock.
func (e *env) settle() { e.pair.Pump() }

// runTimers settles, then fires timers one at a time (settling after each) until no timer is
// pending or limit firings were done. It returns how far the clock moved.
func (e *env) runTimers(limit int) time.Duration {
	e.t.Helper()
	e.settle()
	var moved time.Duration
	for i := 0; i < limit; i++ {
		d, ok := e.clk.AdvanceToNext()
		if !ok {
			return moved
		}
		moved += d
		e.settle()
	}
	e.t.Fatalf("timers still pending after %d firings", limit)
	return moved
}

// record installs a drop hook on end that records (and optionally drops) packets.
type recorder struct {
	mu   sync.Mutex
	pkts []roce.Packet
	drop func(n int, p *roce.Packet) bool // n: index of this packet among those recorded
}

func (r *recorder) hook(p *roce.Packet) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.pkts)
	cp := *p
	cp.Payload = nil
	r.pkts = append(r.pkts, cp)
	return r.drop != nil && r.drop(n, p)
}

func (r *recorder) packets() []roce.Packet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]roce.Packet(nil), r.pkts...)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}
