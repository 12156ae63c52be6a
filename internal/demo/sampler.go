package demo

import (
	"fmt"
	"time"
)

// Clock is the sampler's time source; tests give it a manual clock.
type Clock interface{ Now() time.Time }

// Counter is a monotonically increasing byte count, read atomically.
type Counter func() uint64

// Sample is one interval of the timeline.
type Sample struct {
	At    time.Duration // end of the interval, since the sampler started
	Span  time.Duration // the interval's length as measured
	Bytes []uint64      // per series, bytes in the interval
}

// Rate is series i's throughput over the interval in Gbit/s (0 for an empty interval).
func (s Sample) Rate(i int) float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.Bytes[i]) * 8 / s.Span.Seconds() / 1e9
}

// Sampler turns counters into per-interval byte counts. The caller decides when to sample
// (a ticker in Run, a manual clock in tests); the interval is measured, not assumed, so a
// late tick widens its interval instead of inflating the rate.
type Sampler struct {
	clk     Clock
	names   []string
	src     []Counter
	start   time.Time
	lastAt  time.Time
	last    []uint64
	samples []Sample
}

// NewSampler starts sampling the counters now.
func NewSampler(clk Clock, names []string, src []Counter) (*Sampler, error) {
	if len(names) != len(src) || len(src) == 0 {
		return nil, fmt.Errorf("demo: sampler: %d names for %d counters", len(names), len(src))
	}
	s := &Sampler{clk: clk, names: names, src: src, last: make([]uint64, len(src))}
	s.start = clk.Now()
	s.lastAt = s.start
	for i, c := range src {
		s.last[i] = c()
	}
	return s, nil
}

// Names are the series' names.
func (s *Sampler) Names() []string { return s.names }

// Sample closes the current interval and returns it.
func (s *Sampler) Sample() Sample {
	now := s.clk.Now()
	out := Sample{At: now.Sub(s.start), Span: now.Sub(s.lastAt), Bytes: make([]uint64, len(s.src))}
	for i, c := range s.src {
		v := c()
		out.Bytes[i] = v - s.last[i]
		s.last[i] = v
	}
	s.lastAt = now
	s.samples = append(s.samples, out)
	return out
}

// Open is how long the current interval has been open.
func (s *Sampler) Open() time.Duration { return s.clk.Now().Sub(s.lastAt) }

// Samples is every interval so far.
func (s *Sampler) Samples() []Sample { return s.samples }
