package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// TestToolsEvents runs the programs that wait on completion channels (-e,
// tooltest.EventTools), through the preload object, which lets the plugin make the channels,
// plain and SHIFT.
func TestToolsEvents(t *testing.T) {
	tooltest.RequireTools(t, "ibv_rc_pingpong", "ib_send_bw", "ib_read_bw")
	tooltest.RequireRoot(t)
	b := tooltest.BuildPlugin(t)
	h := tooltest.NewHost(t, b, nil, emusysfs.Shift, devices(addrs(4), "lo")...)
	tools := tooltest.EventTools()
	for _, mode := range []string{"plain", "shift"} {
		m, cdev := tooltest.Mode{Preload: true}, "s1"
		if mode == "shift" {
			m.Shift, m.Job, cdev = "s0:s1,s2:s3", fmt.Sprintf("events-%d", port()), "s2"
		}
		for _, tl := range tools {
			t.Run(mode+"/"+tl.Name, func(t *testing.T) {
				r := tooltest.RunPair(t, h, h, m, m, tl.Name, tl.Args, port(), "s0", cdev, "127.0.0.1", 60*time.Second)
				if r.ClientErr != nil || r.ServerErr != nil {
					t.Fatalf("client: %v, server: %v\n--- client:\n%s\n--- server:\n%s", r.ClientErr, r.ServerErr, r.Client, r.Server)
				}
				tl.Check(t, r.Client)
				tl.Check(t, r.Server)
			})
		}
	}
}

// TestLibmlx5ClaimsConnectXWithoutPreload shows the registration-order problem and its
// remedy on devices with a ConnectX identity: perftest links Debian's libmlx5, which
// registers before libibverbs reads RDMAV_DRIVERS and claims the device, so the run fails;
// with the preload object alone (no RDMAV_DRIVERS) libmlx5-shift registers first and the
// same run goes through it.
func TestLibmlx5ClaimsConnectXWithoutPreload(t *testing.T) {
	tooltest.RequireTools(t, "ib_write_bw", "ibv_devinfo")
	tooltest.RequireRoot(t)
	b := tooltest.BuildPlugin(t)
	h := tooltest.NewHost(t, b, nil, emusysfs.ConnectX, devices(addrs(2), "lo")...)
	args := []string{"-n", strconv.Itoa(tooltest.BWIters), "-s", "16384"}

	// Without the preload, libmlx5 (linked by perftest) registers first, claims the
	// device and cannot open it (its command device is a stand-in).
	out, err := h.Start(t, tooltest.Mode{}, "ib_write_bw", "-d", "s0", "-p", strconv.Itoa(port())).Wait(30 * time.Second)
	if err == nil || !strings.Contains(out+err.Error(), "Couldn't get context") {
		t.Fatalf("ib_write_bw without the preload: %v, want libmlx5's \"Couldn't get context\":\n%s", err, out)
	}

	with := tooltest.Mode{Preload: true, NoDrivers: true}
	r := tooltest.RunPair(t, h, h, with, with, "ib_write_bw", args, port(), "s0", "s1", "127.0.0.1", 60*time.Second)
	if r.ClientErr != nil || r.ServerErr != nil {
		t.Fatalf("with the preload: client: %v, server: %v\n--- client:\n%s\n--- server:\n%s", r.ClientErr, r.ServerErr, r.Client, r.Server)
	}
	tooltest.CheckBW(t, r.Client)
	if !strings.Contains(r.Client, "ibv_wr* API     : ON") {
		t.Errorf("perftest did not see a ConnectX (no ibv_wr_* API):\n%s", r.Client)
	}
	out, err = h.Start(t, with, "ibv_devinfo", "-d", "s0").Wait(30 * time.Second)
	if err != nil || !strings.Contains(out, "board_id:\t\t\tSHIFT_EMULATED") {
		t.Fatalf("ibv_devinfo with the preload: %v\n%s", err, out)
	}
}
