package toolrun

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Pingpong is what ibv_rc_pingpong reports at its end.
type Pingpong struct {
	Bytes       int64
	Iters       int
	Mbps        float64
	UsecPerIter float64
}

var (
	ppBytes = regexp.MustCompile(`(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec`)
	ppIters = regexp.MustCompile(`(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter`)
)

// ParsePingpong reads ibv_rc_pingpong's two result lines.
func ParsePingpong(out string) (Pingpong, error) {
	b := ppBytes.FindStringSubmatch(out)
	i := ppIters.FindStringSubmatch(out)
	if b == nil || i == nil {
		return Pingpong{}, fmt.Errorf("no ibv_rc_pingpong result lines in:\n%s", out)
	}
	var r Pingpong
	r.Bytes, _ = strconv.ParseInt(b[1], 10, 64)
	r.Mbps, _ = strconv.ParseFloat(b[3], 64)
	r.Iters, _ = strconv.Atoi(i[1])
	r.UsecPerIter, _ = strconv.ParseFloat(i[3], 64)
	return r, nil
}

// BW is a perftest bandwidth result line.
type BW struct {
	Bytes      int
	Iterations int
	PeakMBps   float64
	AvgMBps    float64
	MsgRateMpp float64
}

// Lat is a perftest latency result line (microseconds). A run for a duration (-D) reports
// only the average and the transactions per second (TPS); the other figures are then zero.
type Lat struct {
	Bytes      int
	Iterations int
	Min, Max   float64
	Typical    float64
	Avg        float64
	Stdev      float64
	P99, P999  float64
	TPS        float64
}

// resultRow returns the number fields of the line after perftest's result header (the line
// starting with " #bytes").
func resultRow(out string) ([]float64, error) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "#bytes") {
			continue
		}
		for _, row := range lines[i+1:] {
			fs := strings.Fields(row)
			if len(fs) == 0 || strings.HasPrefix(fs[0], "-") {
				continue
			}
			var v []float64
			for _, f := range fs {
				x, err := strconv.ParseFloat(f, 64)
				if err != nil && strings.EqualFold(strings.TrimLeft(f, "+-"), "nan") {
					// glibc's printf of a negative NaN: perftest's t_stdev when rounding makes
					// the variance it takes the square root of negative.
					x, err = math.NaN(), nil
				}
				if err != nil {
					return nil, fmt.Errorf("result row %q: %v", row, err)
				}
				v = append(v, x)
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("no perftest result row in:\n%s", out)
}

// ParseBW reads a perftest *_bw result.
func ParseBW(out string) (BW, error) {
	v, err := resultRow(out)
	if err != nil {
		return BW{}, err
	}
	if len(v) < 5 {
		return BW{}, fmt.Errorf("bandwidth row has %d fields, want 5", len(v))
	}
	return BW{Bytes: int(v[0]), Iterations: int(v[1]), PeakMBps: v[2], AvgMBps: v[3], MsgRateMpp: v[4]}, nil
}

// ParseLat reads a perftest *_lat result.
func ParseLat(out string) (Lat, error) {
	v, err := resultRow(out)
	if err != nil {
		return Lat{}, err
	}
	if len(v) == 4 { // -D: #bytes #iterations t_avg[usec] tps average
		return Lat{Bytes: int(v[0]), Iterations: int(v[1]), Avg: v[2], TPS: v[3]}, nil
	}
	if len(v) < 9 {
		return Lat{}, fmt.Errorf("latency row has %d fields, want 9 (4 for a run with -D)", len(v))
	}
	return Lat{Bytes: int(v[0]), Iterations: int(v[1]), Min: v[2], Max: v[3], Typical: v[4], Avg: v[5],
		Stdev: v[6], P99: v[7], P999: v[8]}, nil
}

// ClockFailed reports whether perftest's output says its own CPU-frequency measurement failed
// ("Correlation coefficient r^2 ... < 0.9", "Can't produce a report"): on a machine too busy
// for the measurement, the run says nothing about the provider.
func ClockFailed(out string) bool {
	return strings.Contains(out, "Can't produce a report") && strings.Contains(out, "Correlation coefficient")
}
