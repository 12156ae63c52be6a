package demo

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
)

func TestSamplerFakeClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	var a, b atomic.Uint64
	a.Store(500) // counts before the sampler starts are not in the first interval
	s, err := NewSampler(clk, []string{"a", "b"}, []Counter{a.Load, b.Load})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		adv  time.Duration
		a, b uint64
	}{
		{100 * time.Millisecond, 125_000_000, 0}, // 1 Gbit in 100 ms: 10 Gbit/s
		{100 * time.Millisecond, 0, 1000},
		{250 * time.Millisecond, 250_000, 250_000}, // a late tick: the interval is measured
	}
	var at time.Duration
	for i, st := range steps {
		clk.Advance(st.adv)
		if got := s.Open(); got != st.adv {
			t.Fatalf("sample %d: interval open for %v, want %v", i, got, st.adv)
		}
		at += st.adv
		a.Add(st.a)
		b.Add(st.b)
		sm := s.Sample()
		if sm.At != at || sm.Span != st.adv || sm.Bytes[0] != st.a || sm.Bytes[1] != st.b {
			t.Fatalf("sample %d = %+v, want at %v span %v bytes [%d %d]", i, sm, at, st.adv, st.a, st.b)
		}
		wantA := float64(st.a) * 8 / st.adv.Seconds() / 1e9
		if got := sm.Rate(0); got != wantA {
			t.Fatalf("sample %d: rate %v Gbit/s, want %v", i, got, wantA)
		}
	}
	if got := s.Samples()[0].Rate(0); got != 10 {
		t.Fatalf("first interval %v Gbit/s, want 10", got)
	}
	if len(s.Samples()) != len(steps) {
		t.Fatalf("%d samples, want %d", len(s.Samples()), len(steps))
	}
	// An empty interval (two samples at the same instant) has rate 0, not NaN.
	if sm := s.Sample(); sm.Span != 0 || sm.Rate(0) != 0 {
		t.Fatalf("empty interval: %+v rate %v", sm, sm.Rate(0))
	}
}

func TestSamplerArgs(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	if _, err := NewSampler(clk, []string{"a"}, nil); err == nil {
		t.Fatal("names without counters accepted")
	}
}
