package nic

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc/rctest"
)

func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Idle devices must not burn a core: the watcher backs off to sleeping. The test measures the
// process CPU time over 2 s with idle devices and reports it; the bound is a failure guard
// only (a watcher that never sleeps costs a whole core per device).
func TestIdleCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 2 s of idle time; skipped with -short")
	}
	for _, ndev := range []int{0, 1, 8} { // 0: the test process alone, for reference
		frac := idleCPU(t, ndev)
		if frac > 0.25 {
			t.Fatalf("%d idle devices use %.0f%% of a core", ndev, 100*frac)
		}
	}
}

// idleCPU measures the process CPU time over 2 s with ndev idle devices of 4 UAR pages each.
func idleCPU(t *testing.T, ndev int) float64 {
	var devs []*Device
	for i := 0; i < ndev; i++ {
		p := rctest.NewPair(netip.AddrFrom4([4]byte{10, 8, byte(i), 1}), netip.AddrFrom4([4]byte{10, 8, byte(i), 2}))
		d, err := New(Config{Name: "emlx5_idle", Ports: []PortConfig{{Link: p.A}}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for j := 0; j < 4; j++ {
			if _, err := d.AllocUAR(); err != nil {
				t.Fatal(err)
			}
		}
		devs = append(devs, d)
	}
	time.Sleep(100 * time.Millisecond) // past the spin window and the back-off ramp
	var p0 uint64
	for _, d := range devs {
		p0 += d.Stats().Passes
	}
	c0, w0 := cpuTime(), time.Now()
	time.Sleep(2 * time.Second)
	c1, w1 := cpuTime(), time.Now()
	var p1 uint64
	for _, d := range devs {
		p1 += d.Stats().Passes
	}
	frac := float64(c1-c0) / float64(w1.Sub(w0))
	passes := "no device"
	if ndev > 0 {
		passes = fmt.Sprintf("%.0f polling passes/s per device", float64(p1-p0)/w1.Sub(w0).Seconds()/float64(ndev))
	}
	t.Logf("idle: %d devices × 4 UAR pages: process CPU %.2f%% of one core over %v (%s)",
		ndev, 100*frac, w1.Sub(w0).Round(time.Millisecond), passes)
	return frac
}

// nopLatency rings signaled NOPs one at a time and returns the doorbell-to-CQE times.
func nopLatency(t testing.TB, a *qpEnd, n int, gap time.Duration) []time.Duration {
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if gap > 0 {
			time.Sleep(gap)
		}
		b := a.sq.Begin()
		p, err := b.Finish(mlx5.CtrlSeg{Opcode: mlx5.OpcodeNOP, QPN: a.qp.QPN(), FMCESE: mlx5.CtrlCQUpdate})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		a.bf.Ring(a.sq, a.db, 1, p, false)
		var c mlx5.CQE64
		for spins := 1; !a.scq.ring.Poll(&c); spins++ {
			// Failure guard only, looked at once in a million spins to keep the loop tight.
			if spins&(1<<20-1) == 0 && time.Since(start) > waitFor {
				t.Fatalf("NOP %d: no CQE %v after the doorbell", i, waitFor)
			}
		}
		lat = append(lat, time.Since(start))
		a.scq.ring.UpdateCI(a.scq.db)
	}
	return lat
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// Doorbell-to-execution latency: a signaled NOP completes inside the device, so the time from
// the UAR write to its CQE is the watcher's reaction plus WQE parsing and CQE writing.
// Measured back to back (the watcher is spinning) and after 5 ms of idleness (it sleeps).
func TestDoorbellLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("latency measurement; skipped with -short")
	}
	e := newEnv(t)
	a, _ := e.pairQPs()
	hot := nopLatency(t, a, 2000, 0)
	cold := nopLatency(t, a, 100, 5*time.Millisecond)
	t.Logf("doorbell→CQE, back to back: p50 %v p90 %v p99 %v", pct(hot, .5), pct(hot, .9), pct(hot, .99))
	t.Logf("doorbell→CQE, after 5 ms idle: p50 %v p90 %v p99 %v", pct(cold, .5), pct(cold, .9), pct(cold, .99))
}

// BenchmarkDoorbellNOP is the back-to-back doorbell-to-CQE round trip of a signaled NOP.
func BenchmarkDoorbellNOP(b *testing.B) {
	e := newEnv(b)
	a, _ := e.pairQPs()
	b.ResetTimer()
	nopLatency(b, a, b.N, 0)
}

func benchWrite(b *testing.B, size, depth int) {
	e := newEnv(b)
	a, r := e.pairQPs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	posted, done := 0, 0
	for done < b.N {
		for posted < b.N && posted-done < depth {
			a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, size)}, raddr: r.va(0), rkey: r.mr.RKey, signaled: true})
			posted++
		}
		var c mlx5.CQE64
		for a.scq.ring.Poll(&c) {
			if c.IsError() {
				b.Fatalf("error CQE %+v", c.Completion())
			}
			done++
		}
		a.scq.ring.UpdateCI(a.scq.db)
	}
	b.StopTimer()
}

// BenchmarkWrite64 is the small-WRITE message rate through two devices over the in-process
// link pair (16 outstanding).
func BenchmarkWrite64(b *testing.B) { benchWrite(b, 64, 16) }

// BenchmarkWrite64K is the bandwidth of 64 KiB WRITEs (8 outstanding).
func BenchmarkWrite64K(b *testing.B) { benchWrite(b, 64<<10, 8) }

// BenchmarkIdleCPU is the CPU an idle emulated host costs: two devices joined by the
// in-process fabric with 8 connected QP pairs (16 QPs) and nothing posted, measured with
// getrusage over 5 s per iteration (run with -benchtime=1x). Reported: the process's CPU in
// percent of one core, and the polling passes per second and device (watcher passes and the
// idle scanner's empty looks).
func BenchmarkIdleCPU(b *testing.B) {
	e := newEnv(b)
	for range 8 {
		e.pairQPs()
	}
	devs := []*Device{e.a.dev, e.b.dev}
	time.Sleep(100 * time.Millisecond) // past the spin window and any back-off ramp
	var cpu, wall time.Duration
	var passes uint64
	b.ResetTimer()
	for range b.N {
		var p0 uint64
		for _, d := range devs {
			p0 += d.Stats().Passes
		}
		c0, w0 := cpuTime(), time.Now()
		time.Sleep(5 * time.Second)
		c1, w1 := cpuTime(), time.Now()
		for _, d := range devs {
			passes += d.Stats().Passes
		}
		passes -= p0
		cpu += c1 - c0
		wall += w1.Sub(w0)
	}
	b.ReportMetric(100*float64(cpu)/float64(wall), "cpu-%")
	b.ReportMetric(float64(passes)/wall.Seconds()/float64(len(devs)), "passes/s/dev")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDoorbellAfterIdle is the doorbell-to-CQE time of a signaled NOP rung after 5 ms
// without any doorbell, when the watcher has gone idle: the emulated NIC's wake-up. Run with
// -benchtime=200x; p50 and p99 over the iterations.
func BenchmarkDoorbellAfterIdle(b *testing.B) {
	e := newEnv(b)
	a, _ := e.pairQPs()
	b.ResetTimer()
	lat := nopLatency(b, a, b.N, 5*time.Millisecond)
	b.ReportMetric(float64(pct(lat, .5).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(pct(lat, .99).Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(0, "ns/op")
}
