package rc

import (
	"bytes"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/rc/rctest"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// realPair is two QPs over a link pair with delivery goroutines and the real clock, as the NIC
// runs them.
type realPair struct {
	pair   *rctest.Pair
	a, b   *QP
	ha, hb *testHost
}

func newRealPair(t testing.TB, mod func(a, b *Config)) *realPair {
	t.Helper()
	r := &realPair{pair: rctest.NewPair(ipA, ipB), ha: newTestHost(), hb: newTestHost()}
	ca, cb := baseConfigs(r.pair, nil)
	if mod != nil {
		mod(&ca, &cb)
	}
	r.a, r.b = New(r.ha), New(r.hb)
	r.pair.A.SetReceiver(r.a.HandlePacket)
	r.pair.B.SetReceiver(r.b.HandlePacket)
	connect(t, r.a, ca)
	connect(t, r.b, cb)
	r.pair.Start()
	t.Cleanup(func() {
		r.a.Close()
		r.b.Close()
		r.pair.Stop()
	})
	return r
}

// waitSends waits until h has n send completions; the timeout only guards against a hang.
func waitSends(t testing.TB, h *testHost, n int) []SendCompletion {
	t.Helper()
	guard := time.After(20 * time.Second)
	for {
		if s := h.sendC(); len(s) >= n {
			return s
		}
		select {
		case <-h.changed:
		case <-guard:
			t.Fatalf("only %d of %d completions after 20 s", len(h.sendC()), n)
		}
	}
}

// With the real clock the ACK timeout is real time: a dead link fails the WR with
// RETRY_EXC_ERR, and Close leaves no timer behind (TestMain checks goroutines).
func TestRealClockRetryExceeded(t *testing.T) {
	r := newRealPair(t, func(a, b *Config) { a.Timeout = 8; a.RetryCnt = 2 }) // ≈1 ms
	r.hb.register(1, 0, 1<<16, AccessRemoteWrite)
	r.pair.A.SetDown(true)
	start := time.Now()
	if err := r.a.Post(&WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 5000)}}); err != nil {
		t.Fatal(err)
	}
	s := waitSends(t, r.ha, 1)
	if s[0].Status != StatusRetryExcErr {
		t.Fatalf("completion %+v", s[0])
	}
	// Lower bound only: the three timeouts cannot end sooner than 3 × 1.05 ms.
	if el := time.Since(start); el < 3*ackTimeout(8) {
		t.Fatalf("RETRY_EXC_ERR after %v, before 3 timeouts of %v", el, ackTimeout(8))
	}
	if st := r.a.Stats(); st.Timeouts != 3 {
		t.Fatalf("timeouts %d, want 3", st.Timeouts)
	}
}

// Concurrent delivery goroutines, real timers and losses: data still arrives intact.
func TestRealClockWithLoss(t *testing.T) {
	r := newRealPair(t, func(a, b *Config) { a.Timeout = 16 }) // 268 ms: no spurious give-up on a loaded machine
	mem := r.hb.register(1, 0, 1<<20, AccessRemoteWrite)
	n := 0
	r.pair.A.SetDrop(func(_ *roce.Packet) bool { n++; return n%97 == 0 })
	src := pattern(1<<20, 3)
	for i := range 16 {
		wr := WorkRequest{Index: uint16(i), Op: OpWrite, RKey: 1, RemoteAddr: uint64(i) << 16, Local: [][]byte{src[i<<16 : (i+1)<<16]}}
		if err := r.a.Post(&wr); err != nil {
			t.Fatal(err)
		}
	}
	s := waitSends(t, r.ha, 16)
	for i, c := range s {
		if c.Status != StatusSuccess || c.Index != uint16(i) {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	if !bytes.Equal(mem, src) {
		t.Fatal("data mismatch")
	}
	if r.a.Stats().Retransmits == 0 {
		t.Fatal("losses caused no retransmission")
	}
}

var _ clock.Clock = clock.Real{}
