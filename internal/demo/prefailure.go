package demo

import (
	"fmt"
	"math"
	"time"
)

// Rate is a throughput with its run-to-run noise: the mean and standard deviation of the
// per-interval rates it was computed from.
type Rate struct {
	Mean, Stdev float64 // GB/s of verified payload
	N           int     // intervals
}

func (r Rate) String() string {
	return fmt.Sprintf("%.2f ± %.2f GB/s (%d intervals)", r.Mean, r.Stdev, r.N)
}

// PreFailureRate is the verified throughput (both streams) over the intervals that end
// before the link goes down (the whole run without a failure), the first interval left out:
// it holds the streams' start. The spread of the intervals is the noise a comparison of two
// runs must allow for.
func (r *Result) PreFailureRate() (Rate, bool) {
	end := r.Config.Duration
	if r.Config.hasFailure() {
		end = r.Config.FailAt
	}
	var rates []float64
	for i, s := range r.Samples {
		if i == 0 || s.At > end || s.Span <= 0 {
			continue
		}
		var b uint64
		for j, name := range Series {
			if name == "WRITE" || name == "SEND" {
				b += s.Bytes[j]
			}
		}
		rates = append(rates, float64(b)/s.Span.Seconds()/1e9)
	}
	if len(rates) < 2 {
		return Rate{}, false
	}
	var sum float64
	for _, v := range rates {
		sum += v
	}
	mean := sum / float64(len(rates))
	var ss float64
	for _, v := range rates {
		ss += (v - mean) * (v - mean)
	}
	return Rate{Mean: mean, Stdev: math.Sqrt(ss / float64(len(rates)-1)), N: len(rates)}, true
}

// CompareRates is the summary line that sets the runs' pre-failure throughputs side by side,
// each with its noise, and says whether they agree within it (the difference of the means
// within two standard deviations of the noisier run). Empty with fewer than two runs.
func CompareRates(runs []*Result) string {
	type named struct {
		mode Mode
		r    Rate
	}
	var rs []named
	for _, run := range runs {
		if r, ok := run.PreFailureRate(); ok {
			rs = append(rs, named{run.Mode, r})
		}
	}
	if len(rs) < 2 {
		return ""
	}
	what := "before the failure"
	if !runs[0].Config.hasFailure() {
		what = "over the run"
	}
	s := fmt.Sprintf("throughput %s (per %v interval, mean ± stdev):", what, runs[0].Config.Interval.Round(time.Millisecond))
	base := rs[0]
	agree := true
	for i, n := range rs {
		sep := ","
		if i == 0 {
			sep = ""
		}
		s += fmt.Sprintf("%s %s %v", sep, n.mode, n.r)
		if i > 0 {
			s += fmt.Sprintf(" = %.2f× %s", n.r.Mean/base.r.Mean, base.mode)
			if math.Abs(n.r.Mean-base.r.Mean) > 2*math.Max(n.r.Stdev, base.r.Stdev) {
				agree = false
			}
		}
	}
	if agree {
		return s + "; the same within their noise"
	}
	return s + "; they differ by more than their noise"
}
