package probe

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newTestWatcher is a watcher with one link and no sockets, to drive observe directly.
func newTestWatcher(st linkState) *watcher {
	d := &watched{name: "eth9", index: st.index, st: st}
	return &watcher{byIndex: map[int]*watched{st.index: d}, devs: []*watched{d},
		events: make(chan LinkEvent, 64), done: make(chan struct{})}
}

func drain(w *watcher) []LinkEvent {
	var evs []LinkEvent
	for {
		select {
		case ev := <-w.events:
			evs = append(evs, ev)
		default:
			return evs
		}
	}
}

const upFlags = unix.IFF_UP | unix.IFF_LOWER_UP

func TestObserveReplaysMergedFlaps(t *testing.T) {
	w := newTestWatcher(linkState{index: 7, flags: upFlags, carrierUp: 1, carrierDn: 0, hasCounts: true})
	now := time.Now()
	// Three flaps merged into one observation that still shows the link up.
	w.observe(7, linkState{index: 7, flags: upFlags, carrierUp: 4, carrierDn: 3, hasCounts: true}, SourceCarrierCount, now)
	evs := drain(w)
	if len(evs) != 6 {
		t.Fatalf("%d events for 3 flaps: %+v", len(evs), evs)
	}
	for i, ev := range evs {
		if ev.Up != (i%2 == 1) || ev.Netdev != "eth9" || ev.Ifindex != 7 || ev.Source != SourceCarrierCount {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	// The same state again: nothing.
	w.observe(7, linkState{index: 7, flags: upFlags, carrierUp: 4, carrierDn: 3, hasCounts: true}, SourceNetlink, now)
	if evs := drain(w); len(evs) != 0 {
		t.Fatalf("repeated state gave %+v", evs)
	}
	// One more down, seen by netlink with its counters.
	w.observe(7, linkState{index: 7, flags: unix.IFF_UP, carrierUp: 4, carrierDn: 4, hasCounts: true}, SourceNetlink, now)
	if evs := drain(w); len(evs) != 1 || evs[0].Up || evs[0].Source != SourceNetlink || evs[0].DownCount != 4 {
		t.Fatalf("carrier down: %+v", evs)
	}
}

func TestObserveAdminAndGone(t *testing.T) {
	w := newTestWatcher(linkState{index: 3, flags: upFlags, hasCounts: true, carrierUp: 1})
	now := time.Now()
	// Administratively down, carrier unchanged (a driver that keeps it): one down event.
	w.observe(3, linkState{index: 3, flags: unix.IFF_LOWER_UP, hasCounts: true, carrierUp: 1}, SourceNetlink, now)
	if evs := drain(w); len(evs) != 1 || evs[0].Up {
		t.Fatalf("admin down: %+v", evs)
	}
	// Carrier flaps while administratively down: nothing usable changed.
	w.observe(3, linkState{index: 3, flags: unix.IFF_LOWER_UP, hasCounts: true, carrierUp: 3, carrierDn: 2}, SourceCarrierCount, now)
	if evs := drain(w); len(evs) != 0 {
		t.Fatalf("flaps while down: %+v", evs)
	}
	w.observe(3, linkState{index: 3, flags: upFlags, hasCounts: true, carrierUp: 3, carrierDn: 2}, SourceDump, now)
	if evs := drain(w); len(evs) != 1 || !evs[0].Up || evs[0].Source != SourceDump {
		t.Fatalf("admin up: %+v", evs)
	}
	// Deleted link: down, once.
	w.observe(3, linkState{index: 3, gone: true}, SourceDump, now)
	w.observe(3, linkState{index: 3, gone: true}, SourceNetlink, now)
	if evs := drain(w); len(evs) != 1 || evs[0].Up {
		t.Fatalf("gone: %+v", evs)
	}
	// Unwatched index: ignored.
	w.observe(4, linkState{index: 4, flags: upFlags}, SourceNetlink, now)
	if evs := drain(w); len(evs) != 0 {
		t.Fatalf("unwatched link: %+v", evs)
	}
}

// TestObserveStale: a netlink message older than a state already read (its counters
// behind) changes nothing.
func TestObserveStale(t *testing.T) {
	w := newTestWatcher(linkState{index: 5, flags: upFlags, hasCounts: true, carrierUp: 2, carrierDn: 1})
	now := time.Now()
	w.observe(5, linkState{index: 5, flags: unix.IFF_UP, hasCounts: true, carrierUp: 2, carrierDn: 2}, SourceCarrierCount, now)
	if evs := drain(w); len(evs) != 1 || evs[0].Up {
		t.Fatalf("down: %+v", evs)
	}
	// The message that was sent for the flap before: counters behind.
	w.observe(5, linkState{index: 5, flags: upFlags, hasCounts: true, carrierUp: 2, carrierDn: 1}, SourceNetlink, now)
	if evs := drain(w); len(evs) != 0 {
		t.Fatalf("stale message gave %+v", evs)
	}
}
