package clock

import (
	"testing"
	"time"
)

var _ Clock = (*Manual)(nil)
var _ Clock = Real{}

func TestManualOrderAndStop(t *testing.T) {
	start := time.Unix(1000, 0)
	m := NewManual(start)
	var got []string
	m.AfterFunc(3*time.Second, func() { got = append(got, "c") })
	m.AfterFunc(1*time.Second, func() { got = append(got, "a") })
	m.AfterFunc(1*time.Second, func() { got = append(got, "a2") })
	s := m.AfterFunc(2*time.Second, func() { got = append(got, "stopped") })
	if !s.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if s.Stop() {
		t.Fatal("second Stop reported true")
	}
	if n := m.Advance(999 * time.Millisecond); n != 0 {
		t.Fatalf("Advance(999ms) ran %d callbacks, want 0", n)
	}
	if n := m.Advance(time.Millisecond); n != 2 {
		t.Fatalf("Advance to 1s ran %d callbacks, want 2", n)
	}
	if m.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", m.Pending())
	}
	m.Advance(time.Hour)
	want := []string{"a", "a2", "c"}
	if len(got) != len(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if !m.Now().Equal(start.Add(time.Hour + time.Second)) {
		t.Fatalf("Now = %v", m.Now())
	}
	if m.Fired() != 3 {
		t.Fatalf("Fired = %d, want 3", m.Fired())
	}
}

func TestManualRearmInsideCallback(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	var at []time.Duration
	var tick func()
	tick = func() {
		at = append(at, m.Now().Sub(time.Unix(0, 0)))
		if len(at) < 5 {
			m.AfterFunc(10*time.Millisecond, tick)
		}
	}
	m.AfterFunc(10*time.Millisecond, tick)
	if n := m.Advance(35 * time.Millisecond); n != 3 {
		t.Fatalf("ran %d, want 3 (rearmed timers inside the interval run too)", n)
	}
	for i, d := range at {
		if d != time.Duration(i+1)*10*time.Millisecond {
			t.Fatalf("callback %d saw Now=%v", i, d)
		}
	}
	d, ok := m.AdvanceToNext()
	if !ok || d != 5*time.Millisecond {
		t.Fatalf("AdvanceToNext = %v,%v; want 5ms,true", d, ok)
	}
	m.AdvanceToNext()
	if _, ok := m.AdvanceToNext(); ok {
		t.Fatal("AdvanceToNext with no timers reported ok")
	}
	if len(at) != 5 {
		t.Fatalf("%d ticks, want 5", len(at))
	}
}

// Real runs a callback once its duration has passed, and Stop cancels one that has not run.
func TestRealAfterFuncAndStop(t *testing.T) {
	fired := make(chan struct{})
	start := time.Now()
	Real{}.AfterFunc(time.Millisecond, func() { close(fired) })
	select {
	case <-fired:
	case <-time.After(20 * time.Second): // failure guard only
		t.Fatal("Real.AfterFunc callback did not run")
	}
	// A lower bound only: the callback cannot run before its duration has passed.
	if el := time.Since(start); el < time.Millisecond {
		t.Fatalf("callback ran after %v, before its 1 ms", el)
	}
	if d := time.Until((Real{}).Now()); d > 0 {
		t.Fatalf("Real.Now is %v ahead of time.Now", d)
	}
	stopped := Real{}.AfterFunc(time.Hour, func() { t.Error("stopped callback ran") })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending Real timer reported false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop reported true")
	}
}
