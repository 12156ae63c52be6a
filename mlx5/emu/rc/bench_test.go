package rc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/rc/rctest"
)

// countHost counts completions without storing them, so the benchmark measures the engine.
type countHost struct {
	testHost
	done, bad int
}

func (h *countHost) SendCompleted(c SendCompletion) {
	h.done++
	if c.Status != StatusSuccess {
		h.bad++
	}
}

// benchWrites posts b.N WRITEs of size bytes, batch at a time, over a pumped link pair on one
// goroutine with the real clock, and reports messages/s and MiB/s.
func benchWrites(b *testing.B, size, batch int) {
	pair := rctest.NewPair(ipA, ipB)
	ha, hb := &countHost{testHost: *newTestHost()}, newTestHost()
	ca, cb := baseConfigs(pair, clock.Real{})
	ca.PathMTU, cb.PathMTU = 4096, 4096
	a, bq := New(ha), New(hb)
	defer a.Close()
	defer bq.Close()
	pair.A.SetReceiver(a.HandlePacket)
	pair.B.SetReceiver(bq.HandlePacket)
	connect(b, a, ca)
	connect(b, bq, cb)
	hb.register(1, 0, size, AccessRemoteWrite)
	wr := WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, size)}}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	posted := 0
	for posted < b.N {
		n := min(batch, b.N-posted)
		for range n {
			wr.Index = uint16(posted)
			if err := a.Post(&wr); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		pair.Pump()
	}
	b.StopTimer()
	if ha.done != b.N || ha.bad != 0 {
		b.Fatalf("%d of %d completed, %d with errors", ha.done, b.N, ha.bad)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64(b.N)*float64(size)/(1<<20)/b.Elapsed().Seconds(), "MiB/s")
}

func BenchmarkWrite64(b *testing.B)  { benchWrites(b, 64, 32) }
func BenchmarkWrite64K(b *testing.B) { benchWrites(b, 64<<10, 8) }

// chanHost counts completions atomically and signals each one, for the goroutine benchmark.
type chanHost struct {
	testHost
	done atomic.Int64
	bad  atomic.Int64
	sig  chan struct{}
}

func (h *chanHost) SendCompleted(c SendCompletion) {
	h.done.Add(1)
	if c.Status != StatusSuccess {
		h.bad.Add(1)
	}
	select {
	case h.sig <- struct{}{}:
	default:
	}
}

func (h *chanHost) wait(b *testing.B, n int64) {
	guard := time.After(20 * time.Second)
	for h.done.Load() < n {
		select {
		case <-h.sig:
		case <-guard:
			b.Fatalf("%d of %d completions after 20 s", h.done.Load(), n)
		}
	}
}

// BenchmarkWrite64Goroutines runs 64-byte WRITEs with a delivery goroutine per link end, as
// the NIC does, posting from the benchmark goroutine with at most 128 outstanding.
func BenchmarkWrite64Goroutines(b *testing.B) {
	pair := rctest.NewPair(ipA, ipB)
	ha := &chanHost{testHost: *newTestHost(), sig: make(chan struct{}, 1)}
	hb := newTestHost()
	ca, cb := baseConfigs(pair, clock.Real{})
	a, bq := New(ha), New(hb)
	pair.A.SetReceiver(a.HandlePacket)
	pair.B.SetReceiver(bq.HandlePacket)
	connect(b, a, ca)
	connect(b, bq, cb)
	pair.Start()
	defer func() {
		a.Close()
		bq.Close()
		pair.Stop()
	}()
	hb.register(1, 0, 64, AccessRemoteWrite)
	wr := WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 64)}}
	b.SetBytes(64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i >= 128 {
			ha.wait(b, int64(i-127))
		}
		wr.Index = uint16(i)
		if err := a.Post(&wr); err != nil {
			b.Fatal(err)
		}
	}
	ha.wait(b, int64(b.N))
	b.StopTimer()
	if ha.bad.Load() != 0 {
		b.Fatalf("%d WRITEs failed", ha.bad.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
