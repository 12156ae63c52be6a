package toolrun

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Outputs as Debian 12's perftest 4.5 and ibverbs-utils 44 print them (trimmed headers).
const (
	bwOut = `---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5412             0.00               56.25                0.000900
---------------------------------------------------------------------------------------
`
	latOut = `---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      1000          52.11          2301.40      88.20               101.33         60.01           310.55                 2301.40    
---------------------------------------------------------------------------------------
`
	latDurationOut = `---------------------------------------------------------------------------------------
 #bytes        #iterations       t_avg[usec]    tps average
 4096          2135            936.81         533.72 
---------------------------------------------------------------------------------------
`
	pingOut = `  local address:  LID 0x0000, QPN 0x000101, PSN 0x2b8c1e, GID ::ffff:127.0.0.1
  remote address: LID 0x0000, QPN 0x000100, PSN 0x8e4b59, GID ::ffff:127.0.0.2
8192000 bytes in 0.05 seconds = 1310.72 Mbit/sec
1000 iters in 0.05 seconds = 50.00 usec/iter
`
)

func TestParse(t *testing.T) {
	bw, err := ParseBW(bwOut)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(BW{Bytes: 65536, Iterations: 5412, AvgMBps: 56.25, MsgRateMpp: 0.0009}, bw); d != "" {
		t.Errorf("ParseBW (-want +got):\n%s", d)
	}
	lat, err := ParseLat(latOut)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Lat{Bytes: 64, Iterations: 1000, Min: 52.11, Max: 2301.40, Typical: 88.20, Avg: 101.33,
		Stdev: 60.01, P99: 310.55, P999: 2301.40}, lat); d != "" {
		t.Errorf("ParseLat (-want +got):\n%s", d)
	}
	pp, err := ParsePingpong(pingOut)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Pingpong{Bytes: 8192000, Iters: 1000, Mbps: 1310.72, UsecPerIter: 50}, pp); d != "" {
		t.Errorf("ParsePingpong (-want +got):\n%s", d)
	}
	for name, f := range map[string]func(string) error{
		"bw":       func(s string) error { _, err := ParseBW(s); return err },
		"lat":      func(s string) error { _, err := ParseLat(s); return err },
		"pingpong": func(s string) error { _, err := ParsePingpong(s); return err },
	} {
		if f("Failed status 12: wr_id 0 syndrom 0x81\n") == nil {
			t.Errorf("%s: a failure's output parsed as a result", name)
		}
	}
	if _, err := ParseLat(bwOut); err == nil {
		t.Error("a bandwidth row parsed as a latency row")
	}
}

// TestParseLatNaNStdev: on a loaded host perftest prints t_stdev as glibc's "-nan" (seen under
// make test); the row still parses, the stdev as NaN.
// TestParseLatDuration: a latency tool run with -D prints a shorter row.
func TestParseLatDuration(t *testing.T) {
	lat, err := ParseLat(latDurationOut)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Lat{Bytes: 4096, Iterations: 2135, Avg: 936.81, TPS: 533.72}, lat); d != "" {
		t.Errorf("ParseLat (-want +got):\n%s", d)
	}
	if _, err := ParseLat(strings.Replace(latDurationOut, "533.72", "", 1)); err == nil {
		t.Error("ParseLat took a row of 3 fields")
	}
}

func TestParseLatNaNStdev(t *testing.T) {
	out := strings.Replace(latOut, "60.01 ", "-nan  ", 1)
	lat, err := ParseLat(out)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(lat.Stdev) || lat.Avg != 101.33 || lat.P999 != 2301.40 {
		t.Errorf("ParseLat: %+v", lat)
	}
	if _, err := ParseLat(strings.Replace(latOut, "60.01", "-nanx", 1)); err == nil {
		t.Error("ParseLat accepted -nanx")
	}
}

// TestClockFailed: perftest's report when its CPU-frequency measurement failed, and a result
// that mentions neither line.
func TestClockFailed(t *testing.T) {
	failed := "Conflicting CPU frequency values detected\n Correlation coefficient r^2 = 0.89 < 0.9\n Can't produce a report\n"
	if !ClockFailed(failed) {
		t.Errorf("not recognised:\n%s", failed)
	}
	for _, out := range []string{"", " 65536      5000           6574.31            6573.86		   0.105182\n", " Correlation coefficient r^2 = 0.95\n"} {
		if ClockFailed(out) {
			t.Errorf("taken for a clock failure:\n%s", out)
		}
	}
}
