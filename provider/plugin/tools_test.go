package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/toolrun"
	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// tool is one program of the matrix and how to check its result.
type tool struct {
	name  string
	args  []string // besides -d, -p and the server address
	api   []string // extra arguments selecting the post API: nil for the default
	check func(t *testing.T, out string)
	// passive: the server only serves the client's READs and reports nothing itself.
	passive bool
}

const (
	pingIters = 200
	bwIters   = 500
	latIters  = 200
	pingSize  = 4096
)

func checkPingpong(t *testing.T, out string) {
	t.Helper()
	r, err := toolrun.ParsePingpong(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Iters != pingIters || r.Bytes != int64(2*pingSize*pingIters) || r.UsecPerIter <= 0 {
		t.Fatalf("pingpong result %+v, want %d iterations of %d bytes each way", r, pingIters, pingSize)
	}
}

func checkBW(t *testing.T, out string) {
	t.Helper()
	r, err := toolrun.ParseBW(out)
	if err != nil {
		t.Fatal(err)
	}
	// The receiving side of ib_send_bw reports no peak (0); everything else has both.
	if r.Iterations != bwIters || r.AvgMBps <= 0 || (r.PeakMBps != 0 && r.PeakMBps < r.AvgMBps) {
		t.Fatalf("bandwidth result %+v, want %d iterations and a positive bandwidth", r, bwIters)
	}
}

func checkLat(t *testing.T, out string) {
	t.Helper()
	r, err := toolrun.ParseLat(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Iterations != latIters || r.Typical <= 0 || r.Min > r.Typical || r.Max < r.Typical {
		t.Fatalf("latency result %+v, want %d iterations and ordered latencies", r, latIters)
	}
}

// matrix is every tool, with the send API variants: ibv_post_send, and the ibv_wr_* API that
// perftest uses on a ConnectX part id (the emulated device reports MT4123) and
// ibv_rc_pingpong with -N.
func matrix() []tool {
	ping := []string{"-g", "0", "-c", "-n", strconv.Itoa(pingIters), "-s", strconv.Itoa(pingSize)}
	bw := []string{"-n", strconv.Itoa(bwIters), "-s", "16384"}
	lat := []string{"-n", strconv.Itoa(latIters), "-s", "64"}
	var ts []tool
	ts = append(ts, tool{"ibv_rc_pingpong", ping, nil, checkPingpong, false}, tool{"ibv_rc_pingpong", ping, []string{"-N"}, checkPingpong, false})
	for _, p := range []string{"ib_write_bw", "ib_send_bw", "ib_read_bw"} {
		ts = append(ts, tool{p, bw, nil, checkBW, false}, tool{p, bw, []string{"--use_old_post_send"}, checkBW, false})
	}
	for _, p := range []string{"ib_write_lat", "ib_send_lat", "ib_read_lat"} {
		passive := p == "ib_read_lat"
		ts = append(ts, tool{p, lat, nil, checkLat, passive}, tool{p, lat, []string{"--use_old_post_send"}, checkLat, passive})
	}
	return ts
}

func (tl tool) label() string {
	api := "wr_api"
	switch {
	case len(tl.api) == 0 && tl.name == "ibv_rc_pingpong":
		api = "post_send"
	case len(tl.api) > 0 && tl.api[0] == "--use_old_post_send":
		api = "post_send"
	}
	return tl.name + "/" + api
}

// runMatrix runs every tool between server device sdev on hs and client device cdev on hc.
func runMatrix(t *testing.T, hs, hc *tooltest.Host, ms, mc tooltest.Mode, sdev, cdev, addr string) {
	for _, tl := range matrix() {
		t.Run(tl.label(), func(t *testing.T) {
			args := append(append([]string{}, tl.args...), tl.api...)
			r := tooltest.RunPair(t, hs, hc, ms, mc, tl.name, args, port(), sdev, cdev, addr, 60*time.Second)
			if r.ClientErr != nil || r.ServerErr != nil {
				t.Fatalf("client: %v, server: %v\n--- client:\n%s\n--- server:\n%s", r.ClientErr, r.ServerErr, r.Client, r.Server)
			}
			tl.check(t, r.Client)
			if !tl.passive {
				tl.check(t, r.Server)
			}
		})
	}
}

// TestToolsLoopback runs the tool matrix between two processes on loopback addresses, in
// plain mode (the provider) and in SHIFT mode (failover, each device with a backup), with
// no failure: the programs cannot tell the modes apart.
func TestToolsLoopback(t *testing.T) {
	tooltest.RequireTools(t, "ibv_rc_pingpong", "ib_write_bw", "ib_send_bw", "ib_read_bw", "ib_write_lat", "ib_send_lat", "ib_read_lat")
	tooltest.RequireRoot(t)
	b := tooltest.BuildPlugin(t)
	h := tooltest.NewHost(t, b, nil, emusysfs.Shift, devices(addrs(4), "lo")...)
	t.Run("plain", func(t *testing.T) {
		runMatrix(t, h, h, tooltest.Mode{}, tooltest.Mode{}, "s0", "s1", "127.0.0.1")
	})
	t.Run("shift", func(t *testing.T) {
		m := tooltest.Mode{Shift: "s0:s1,s2:s3", Job: fmt.Sprintf("tools-%d", port())}
		runMatrix(t, h, h, m, m, "s0", "s2", "127.0.0.1")
	})
}
