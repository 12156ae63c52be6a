package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Every test kind runs end to end over two emulated hosts, with the payload checked at the
// receiving side (bandwidth) and the ping-pong completing every iteration (latency).
func TestPerfEmulated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-test", "write", "-n", "300", "-s", "8192", "-q", "2", "-t", "16"}, []string{"server: 8192 bytes x 2 QPs verified", "RDMA_WRITE BW"}},
		{[]string{"-test", "send", "-n", "300", "-s", "1000", "-q", "2", "-t", "16"}, []string{"server: 1000 bytes x 2 QPs verified", "RDMA_SEND BW"}},
		{[]string{"-test", "read", "-n", "300", "-s", "5000", "-t", "8"}, []string{"data verified", "RDMA_READ BW"}},
		{[]string{"-test", "write", "-lat", "-n", "100"}, []string{"RDMA_WRITE latency", " 2          100 "}},
		{[]string{"-test", "send", "-lat", "-n", "100", "-s", "300"}, []string{"RDMA_SEND latency", " 300        100 "}},
		{[]string{"-test", "read", "-lat", "-n", "100", "-s", "64"}, []string{"RDMA_READ latency", " 64         100 "}},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"perf", "-emulated"}, tc.args...)
		if rc := run(args, &out, &errb); rc != 0 {
			t.Fatalf("%v: rc %d: %s", tc.args, rc, errb.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
}

func TestPerfFlags(t *testing.T) {
	c, err := parsePerf([]string{"-d", "mlx5_1", "-x", "3", "-lat", "-test", "send", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.dev != "mlx5_1" || c.gidIdx != 3 || !c.lat || c.size != 2 || c.iters != 1000 || c.inline != 220 || c.server != "10.0.0.1" {
		t.Fatalf("%+v", c)
	}
	for _, bad := range [][]string{{"-test", "atomic"}, {"-lat", "-q", "2"}, {"-s", "-1"}, {"a", "b"}} {
		if _, err := parsePerf(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"nosuch"}, &out, &errb); rc != 2 {
		t.Errorf("unknown command rc %d", rc)
	}
	out.Reset()
	if rc := run([]string{"perf", "-h"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "-emulated") {
		t.Errorf("perf -h: rc %d, output %q", rc, out.String())
	}
}

func TestSummarize(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i)*time.Microsecond)
	}
	st := summarize(s)
	if st.Min != time.Microsecond || st.Max != 1000*time.Microsecond || st.Median != 501*time.Microsecond ||
		st.P99 != 990*time.Microsecond || st.P999 != 999*time.Microsecond || st.Avg != 500500*time.Nanosecond {
		t.Fatalf("%+v", st)
	}
}
