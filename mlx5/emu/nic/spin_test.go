package nic

import (
	"runtime"
	"testing"
	"time"
)

func TestSpinAfterWake(t *testing.T) {
	const other = 7 * time.Microsecond // a spin chosen by an earlier wake
	for _, c := range []struct {
		name           string
		scanned, poked bool
		want           time.Duration
	}{
		{"scanner", true, false, spinWindow},
		{"poke", false, true, 0},
		{"kick", false, false, other},
	} {
		if got := spinAfterWake(other, c.scanned, c.poked); got != c.want {
			t.Errorf("%s: spin %v, want %v", c.name, got, c.want)
		}
	}
}

// A watcher woken by a poke parks as soon as a pass finds nothing: its writers wake it
// themselves, so a spin would only hold a processor (watcher.go). Counted in passes rather
// than time: a spinning watcher makes a pass on every yield for spinWindow.
func TestPokedWatcherParksAtOnce(t *testing.T) {
	e := newEnv(t)
	a, _ := e.pairQPs()
	d := a.h.dev
	parked := func(after uint64) Stats {
		t.Helper()
		deadline := time.Now().Add(waitFor)
		for {
			if s := d.Stats(); s.Sleeps > after {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the watcher did not park within %v", waitFor)
			}
			runtime.Gosched()
		}
	}
	// The watcher starts spinning, as for a writer the scanner serves; once parked, the next
	// doorbell's poke wakes it. A round whose park the scanner ended instead (it looked
	// between the test's register write and its poke: rare, and under load) or that parked
	// twice tells nothing of the rule and is left out.
	s0 := parked(0)
	const want, most = 5, 50
	var worst uint64
	poked := 0
	for i := 0; i < most && poked < want; i++ {
		nopLatency(t, a, 1, 0)
		s1 := parked(s0.Sleeps)
		passes := (s1.Passes - s1.IdleLooks) - (s0.Passes - s0.IdleLooks) // the watcher's own
		ok := s1.PokeWakes == s0.PokeWakes+1 && s1.Sleeps == s0.Sleeps+1
		t.Logf("round %d: %d passes of the watcher from the doorbell to the park (woken by the poke: %v)", i, passes, ok)
		if ok {
			poked++
			worst = max(worst, passes)
		}
		s0 = s1
	}
	if poked < want {
		t.Fatalf("only %d of %d doorbells' pokes ended the watcher's park", poked, most)
	}
	// The poked wake's pass and the empty pass (a doorbell of the test's found by the look
	// after a park adds one); a 50 µs spin makes hundreds on an idle machine.
	if worst > 8 {
		t.Fatalf("up to %d passes between a poked doorbell and the park: the watcher spun", worst)
	}
}
