package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/uverbs"
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
	// An out-of-range value names its flag; -s 0 and -n 0 are errors, not the defaults.
	for _, c := range []struct{ args []string }{{[]string{"-s", "0"}}, {[]string{"-n", "0"}}, {[]string{"-q", "65"}},
		{[]string{"-t", "0"}}, {[]string{"-u", "32"}}, {[]string{"-x", "256"}}, {[]string{"-i", "0"}}, {[]string{"-p", "70000"}}} {
		if _, err := parsePerf(c.args); err == nil || !strings.HasPrefix(err.Error(), c.args[0]+" ") {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.args[0])
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

// Two perf instances, each with its own emulated HCA bound to a loopback address, exchange
// RoCEv2 over UDP through the kernel; the out-of-band exchange runs over TCP as between
// processes.
func TestPerfUDPLoopback(t *testing.T) {
	n := rand.IntN(200) + 20
	srvIP, cliIP := fmt.Sprintf("127.77.%d.1", n), fmt.Sprintf("127.77.%d.2", n)
	port := 20000 + rand.IntN(12000) // below the ephemeral ports (32768 up)
	srvErr := make(chan error, 1)
	var srvOut bytes.Buffer
	go func() {
		srvErr <- perfMain([]string{"-emu-ip", srvIP, "-p", fmt.Sprint(port), "-test", "write", "-n", "200", "-s", "4096"}, &srvOut)
	}()
	var out bytes.Buffer
	var err error
	for try := 0; try < 100; try++ { // the server may not listen yet
		if err = perfMain([]string{"-emu-ip", cliIP, "-p", fmt.Sprint(port), "-test", "write", "-n", "200", "-s", "4096", "127.0.0.1"}, &out); err == nil ||
			!strings.Contains(err.Error(), "connection refused") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := <-srvErr; err != nil {
		t.Fatalf("server: %v", err)
	}
	if !strings.Contains(srvOut.String(), "server: 4096 bytes x 1 QPs verified") || !strings.Contains(out.String(), "RDMA_WRITE BW") {
		t.Fatalf("server:\n%s\nclient:\n%s", srvOut.String(), out.String())
	}
}

// TestPerfCLIErrors: a server on a device that does not exist fails at once (it does not
// listen for a client first), naming the device once; -emulated refuses -d and -emu-ip.
func TestPerfCLIErrors(t *testing.T) {
	done := make(chan error, 1)
	go func() { done <- perfMain([]string{"-d", "nosuch-perf-dev", "-p", "1"}, io.Discard) }()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, uverbs.ErrNoDevice) || strings.Count(err.Error(), "nosuch-perf-dev") != 1 {
			t.Errorf("missing device: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("shiftctl perf -d <missing> is still running (listening?) after 30 s")
	}
	for _, args := range [][]string{{"-emulated", "-d", "x"}, {"-emulated", "-emu-ip", "127.0.0.1"}} {
		if err := perfMain(args, io.Discard); err == nil || !strings.Contains(err.Error(), "-emulated") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
