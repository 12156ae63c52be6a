package demo

import (
	"math"
	"strings"
	"testing"
	"time"
)

// rateRun builds a result whose WRITE stream verified perInterval[i] bytes in interval i
// (100 ms each) and the SEND stream nothing.
func rateRun(mode Mode, failAt time.Duration, perInterval ...uint64) *Result {
	r := &Result{Mode: mode, Config: Config{Duration: time.Duration(len(perInterval)) * 100 * time.Millisecond,
		FailAt: failAt, RecoverAt: -1, Interval: 100 * time.Millisecond}}
	for i, b := range perInterval {
		r.Samples = append(r.Samples, Sample{At: time.Duration(i+1) * 100 * time.Millisecond, Span: 100 * time.Millisecond,
			Bytes: []uint64{b, 0, 0, 0}})
	}
	return r
}

func TestPreFailureRate(t *testing.T) {
	// The first interval (the start) and those after the failure at 0.5 s are left out:
	// 1e8 and 1.2e8 bytes per 100 ms are 1.0 and 1.2 GB/s.
	r := rateRun(ModeProvider, 500*time.Millisecond, 1, 1e8, 1.2e8, 1e8, 1.2e8, 0, 0)
	got, ok := r.PreFailureRate()
	if !ok || got.N != 4 || math.Abs(got.Mean-1.1) > 1e-9 || math.Abs(got.Stdev-math.Sqrt(0.04/3)) > 1e-9 {
		t.Fatalf("rate %+v %v, want 4 intervals, mean 1.1, stdev %.4f", got, ok, math.Sqrt(0.04/3))
	}
	if _, ok := rateRun(ModeProvider, 100*time.Millisecond, 5, 5, 5).PreFailureRate(); ok {
		t.Fatal("a rate from no interval before the failure")
	}
	// No failure: the whole run after its first interval.
	if got, ok := rateRun(ModeShift, -1, 0, 2e8, 2e8).PreFailureRate(); !ok || got.N != 2 || math.Abs(got.Mean-2) > 1e-9 || got.Stdev != 0 {
		t.Fatalf("no failure: %+v %v", got, ok)
	}
}

func TestCompareRates(t *testing.T) {
	plain := rateRun(ModeProvider, -1, 0, 1e8, 1.1e8, 0.9e8, 1e8)
	same := rateRun(ModeShift, -1, 0, 0.95e8, 1.05e8, 1e8, 0.98e8)
	slow := rateRun(ModeShift, -1, 0, 0.5e8, 0.52e8, 0.49e8, 0.5e8)
	if s := CompareRates([]*Result{plain, same}); !strings.Contains(s, "the same within their noise") || !strings.Contains(s, "provider 1.00 ± 0.08 GB/s") {
		t.Errorf("same: %q", s)
	}
	if s := CompareRates([]*Result{plain, slow}); !strings.Contains(s, "differ by more than their noise") || !strings.Contains(s, "0.50× provider") {
		t.Errorf("slow: %q", s)
	}
	if s := CompareRates([]*Result{plain}); s != "" {
		t.Errorf("one run: %q", s)
	}
}
