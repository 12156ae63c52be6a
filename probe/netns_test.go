package probe

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/shift-rdma/shift/internal/netnstest"
)

// pair is a veth pair between two namespaces; the watched end is a.
type pair struct {
	a, b *netnstest.Veth
}

func newPair(t testing.TB, sameIndex bool) pair {
	na, nb := netnstest.New(t), netnstest.New(t)
	cfg := netnstest.VethConfig{
		Addrs:   [2]netip.Prefix{netip.MustParsePrefix("10.91.0.1/24"), netip.MustParsePrefix("10.91.0.2/24")},
		Indexes: [2]int{101, 102},
	}
	if sameIndex {
		// Both ends index 101: the kernel's link watch treats the link like a physical
		// NIC and rate-limits its carrier events (FINDINGS: link-state detection).
		cfg.Indexes = [2]int{101, 101}
	}
	a, b := netnstest.NewVeth(t, na, nb, cfg)
	return pair{a, b}
}

// setLink sets v up or down with one rtnetlink request from inside its namespace and
// returns the time just before the request was sent.
func setLink(t testing.TB, v *netnstest.Veth, up bool) time.Time {
	t.Helper()
	var t0 time.Time
	err := v.NS.Do(func() error {
		l, err := netlink.LinkByName(v.Name)
		if err != nil {
			return err
		}
		t0 = time.Now()
		if up {
			return netlink.LinkSetUp(l)
		}
		return netlink.LinkSetDown(l)
	})
	if err != nil {
		t.Fatalf("set %s up=%v: %v", v.Name, up, err)
	}
	return t0
}

func watch(t testing.TB, p pair, opts Options) Watcher {
	t.Helper()
	opts.Netdevs = []string{p.a.Name}
	opts.NetNS = "/var/run/netns/" + p.a.NS.Name
	w, err := New(opts)
	if err != nil {
		if opts.EBPF == EBPFFexit || opts.EBPF == EBPFTracepoint {
			t.Skipf("eBPF source refused by this kernel: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// next waits for the next event (failure guard: 10 s).
func next(t testing.TB, w Watcher) LinkEvent {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatal("events closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no link event within 10 s")
	}
	panic("unreachable")
}

// sources isolates each source in turn.
var sources = []struct {
	src  Source
	opts Options
}{
	{SourceNetlink, Options{EBPF: EBPFOff, PollInterval: -1, DumpInterval: -1}},
	{SourceCarrierCount, Options{NoNetlink: true, EBPF: EBPFOff, PollInterval: 10 * time.Millisecond, DumpInterval: -1}},
	{SourceDump, Options{NoNetlink: true, EBPF: EBPFOff, PollInterval: -1, DumpInterval: 50 * time.Millisecond}},
	{SourceTracepoint, Options{NoNetlink: true, EBPF: EBPFTracepoint, PollInterval: -1, DumpInterval: -1}},
	{SourceFexit, Options{NoNetlink: true, EBPF: EBPFFexit, PollInterval: -1, DumpInterval: -1}},
}

// TestDownUpEachSource: the watched end's carrier goes (peer set down) and comes back, and
// the watched end itself is set down and up, by rtnetlink requests and by `ip link set`;
// each source alone reports each transition with
// the right netdev, index and direction.
func TestDownUpEachSource(t *testing.T) {
	for _, s := range sources {
		t.Run(string(s.src), func(t *testing.T) {
			p := newPair(t, false)
			w := watch(t, p, s.opts)
			if got := w.Sources(); !slices.Contains(got, s.src) {
				t.Fatalf("sources %v lack %s", got, s.src)
			}
			for _, step := range []struct {
				v     *netnstest.Veth
				up    bool
				useIP bool // `ip link set` instead of our own rtnetlink request
			}{{p.b, false, false}, {p.b, true, false}, {p.a, false, false}, {p.a, true, false},
				{p.b, false, true}, {p.b, true, true}} {
				if step.useIP {
					step.v.SetUp(t, step.up)
				} else {
					setLink(t, step.v, step.up)
				}
				ev := next(t, w)
				if ev.Netdev != p.a.Name || ev.Ifindex != p.a.Index || ev.Up != step.up || ev.Source != s.src {
					t.Fatalf("after setting %s up=%v: event %+v", step.v.Name, step.up, ev)
				}
			}
		})
	}
}

// TestFlapsAllCounted: 20 short flaps of the peer (carrier only on the watched end) are
// reported as 20 downs and 20 ups, alternating, whichever source sees them first.
func TestFlapsAllCounted(t *testing.T) {
	for _, c := range []struct {
		name      string
		sameIndex bool
		opts      Options
	}{
		{"all", false, Options{PollInterval: 20 * time.Millisecond}},
		{"all/sameIndex", true, Options{PollInterval: 20 * time.Millisecond}},
		// The counters alone, read every 20 ms, far slower than the flaps.
		{"carrier-count", true, Options{NoNetlink: true, EBPF: EBPFOff, PollInterval: 20 * time.Millisecond, DumpInterval: -1}},
		{"netlink", true, Options{EBPF: EBPFOff, PollInterval: -1, DumpInterval: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, c.sameIndex)
			w := watch(t, p, c.opts)
			const flaps = 20
			err := p.b.NS.Do(func() error {
				l, err := netlink.LinkByName(p.b.Name)
				if err != nil {
					return err
				}
				for i := 0; i < flaps; i++ {
					if err := netlink.LinkSetDown(l); err != nil {
						return err
					}
					if err := netlink.LinkSetUp(l); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var downs, ups int
			bySource := map[Source]int{}
			for downs < flaps || ups < flaps {
				ev := next(t, w)
				if ev.Up != (downs > ups) || ev.Netdev != p.a.Name {
					t.Fatalf("after %d downs and %d ups: event %+v", downs, ups, ev)
				}
				if ev.Up {
					ups++
				} else {
					downs++
				}
				bySource[ev.Source]++
			}
			// Nothing more: wait one dump period and a few polls.
			select {
			case ev := <-w.Events():
				t.Fatalf("extra event %+v", ev)
			case <-time.After(1500 * time.Millisecond):
			}
			t.Logf("sources %v, eBPF: %v; events by source: %v", w.Sources(), w.EBPFError(), bySource)
		})
	}
}

// BenchmarkDetectLatency measures, for each source alone, the time from the peer's
// link-down request to the watched end's down event, reported as median and p99 over b.N
// down/up cycles (run with -bench DetectLatency -benchtime 40x). sameIndex=true gives both
// veth ends one index, which makes the kernel's link watch treat them like a physical NIC
// (rate-limited carrier events).
func BenchmarkDetectLatency(b *testing.B) {
	for _, sameIndex := range []bool{false, true} {
		for _, s := range sources {
			b.Run(fmt.Sprintf("%s/sameIndex=%v", s.src, sameIndex), func(b *testing.B) {
				if sameIndex && (s.src == SourceCarrierCount || s.src == SourceDump) {
					b.Skip("polled sources do not depend on the link watch")
				}
				p := newPair(b, sameIndex)
				w := watch(b, p, s.opts)
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := setLink(b, p.b, false)
					ev := next(b, w)
					if ev.Up {
						b.Fatalf("iteration %d: %+v", i, ev)
					}
					lat = append(lat, ev.Time.Sub(t0))
					setLink(b, p.b, true)
					if ev := next(b, w); !ev.Up {
						b.Fatalf("iteration %d: %+v", i, ev)
					}
				}
				b.StopTimer()
				slices.Sort(lat)
				med, p99 := lat[len(lat)/2], lat[(len(lat)*99+99)/100-1]
				b.ReportMetric(float64(med.Nanoseconds())/1e3, "median-µs")
				b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// TestCloseReleases: Close stops every goroutine and closes every descriptor the watcher
// opened (sockets, eBPF objects), and closes Events.
func TestCloseReleases(t *testing.T) {
	p := newPair(t, false)
	fds := func() int {
		e, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("fd count needs /proc: %v", err)
		}
		return len(e)
	}
	// Warm up: the first watcher loads the kernel BTF (cached by cilium/ebpf for the process).
	w0, err := New(Options{Netdevs: []string{p.a.Name}, NetNS: "/var/run/netns/" + p.a.NS.Name})
	if err != nil {
		t.Fatal(err)
	}
	w0.Close()
	g0, f0 := runtime.NumGoroutine(), fds()
	for i := 0; i < 3; i++ {
		w, err := New(Options{Netdevs: []string{p.a.Name}, NetNS: "/var/run/netns/" + p.a.NS.Name, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		setLink(t, p.b, i%2 == 1)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		for range w.Events() {
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > g0 || fds() > f0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines %d → %d, fds %d → %d\n%s", g0, runtime.NumGoroutine(), f0, fds(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNoSuchLink(t *testing.T) {
	for _, name := range []string{"shiftnolink0", "shift-no-such-link-name"} {
		_, err := New(Options{Netdevs: []string{name}, EBPF: EBPFOff})
		if !errors.Is(err, ErrNoLink) {
			t.Fatalf("missing link %s: %v", name, err)
		}
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("no netdev accepted")
	}
}
