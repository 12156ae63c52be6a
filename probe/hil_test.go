package probe

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/hiltest"
)

// TestHIL watches the netdev of the first SHIFT_HIL_DEVICES port with each source in turn
// while the port is set down and up for real: each source reports each transition, and the
// time from the request to the event is logged. On a ConnectX the carrier returns after link
// training, seconds after the request, hence the long guard.
func TestHIL(t *testing.T) {
	r := hiltest.Need(t, 2)
	dev := r.Devices[0]
	nd, err := hiltest.Netdev(dev)
	if err != nil {
		t.Fatal(err)
	}
	hilSources(t, nd, "", func(up bool) { r.SetLink(t, dev, up) }, time.Minute)
}

// TestHILPlumbing runs the hardware body on a veth pair in the project's own namespaces.
func TestHILPlumbing(t *testing.T) {
	if os.Getenv("SHIFT_HIL_DEVICES") != "" {
		t.Skip("real devices configured; TestHIL covers them")
	}
	p := newPair(t, false)
	hilSources(t, p.a.Name, "/var/run/netns/"+p.a.NS.Name, func(up bool) { setLink(t, p.a, up) }, 10*time.Second)
}

func hilSources(t *testing.T, netdev, netns string, set func(up bool), guard time.Duration) {
	for _, s := range sources {
		t.Run(string(s.src), func(t *testing.T) {
			o := s.opts
			o.Netdevs, o.NetNS = []string{netdev}, netns
			w, err := New(o)
			if err != nil {
				if o.EBPF == EBPFFexit || o.EBPF == EBPFTracepoint {
					t.Skipf("eBPF source refused by this kernel: %v", err)
				}
				t.Fatal(err)
			}
			defer w.Close()
			if got := w.Sources(); !slices.Contains(got, s.src) {
				t.Fatalf("sources %v lack %s", got, s.src)
			}
			for cycle := range 2 {
				for _, up := range []bool{false, true} {
					t0 := time.Now()
					set(up)
					ev := nextWithin(t, w, up, guard)
					if ev.Netdev != netdev || ev.Source != s.src {
						t.Fatalf("cycle %d up=%v: event %+v", cycle, up, ev)
					}
					t.Logf("cycle %d: %s up=%v reported after %v", cycle, netdev, up, ev.Time.Sub(t0))
				}
			}
		})
	}
}

// nextWithin returns the next event with direction up, skipping others (a real port's
// carrier may flicker while it trains), failing after guard.
func nextWithin(t *testing.T, w Watcher, up bool, guard time.Duration) LinkEvent {
	t.Helper()
	deadline := time.After(guard)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatal("events closed")
			}
			if ev.Up == up {
				return ev
			}
		case <-deadline:
			t.Fatalf("no up=%v event within %v", up, guard)
		}
	}
}
