package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// perfResult is what the client measured.
type perfResult struct {
	c        perfConfig
	elapsed  time.Duration   // bandwidth tests
	samples  []time.Duration // latency tests (one-way for write/send, full for read)
	verified bool
}

// latencyStats summarises samples the way perftest's *_lat tools print them.
type latencyStats struct {
	Min, Max, Median, Avg, Stdev, P99, P999 time.Duration
}

func summarize(s []time.Duration) latencyStats {
	if len(s) == 0 {
		return latencyStats{}
	}
	v := slices.Clone(s)
	slices.Sort(v)
	var sum float64
	for _, d := range v {
		sum += float64(d)
	}
	avg := sum / float64(len(v))
	var sq float64
	for _, d := range v {
		sq += (float64(d) - avg) * (float64(d) - avg)
	}
	pct := func(p float64) time.Duration { return v[min(len(v)-1, int(math.Ceil(p*float64(len(v))))-1)] }
	return latencyStats{Min: v[0], Max: v[len(v)-1], Median: v[len(v)/2], Avg: time.Duration(avg),
		Stdev: time.Duration(math.Sqrt(sq / float64(len(v)))), P99: pct(0.99), P999: pct(0.999)}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (r *perfResult) print(w io.Writer) {
	c := r.c
	mode := "BW"
	if c.lat {
		mode = "latency"
	}
	fmt.Fprintf(w, " RDMA_%s %s test, device %s, %d QP(s), tx depth %d, inline %d\n", upper(c.test), mode, c.dev, c.qps, c.depth, c.inline)
	if c.lat {
		st := summarize(r.samples)
		fmt.Fprintf(w, " %-10s %-12s %-12s %-12s %-14s %-12s %-12s %-16s %-16s\n", "#bytes", "#iterations",
			"t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99% percentile", "99.9% percentile")
		fmt.Fprintf(w, " %-10d %-12d %-12.2f %-12.2f %-14.2f %-12.2f %-12.2f %-16.2f %-16.2f\n", c.size, len(r.samples),
			us(st.Min), us(st.Max), us(st.Median), us(st.Avg), us(st.Stdev), us(st.P99), us(st.P999))
		return
	}
	bytes := float64(c.size) * float64(c.iters)
	sec := r.elapsed.Seconds()
	fmt.Fprintf(w, " %-10s %-12s %-20s %-14s\n", "#bytes", "#iterations", "BW average[MB/sec]", "MsgRate[Mpps]")
	fmt.Fprintf(w, " %-10d %-12d %-20.2f %-14.6f\n", c.size, c.iters, bytes/sec/1e6, float64(c.iters)/sec/1e6)
	if r.verified {
		fmt.Fprintf(w, " data verified\n")
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
