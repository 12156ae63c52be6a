package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/shift-rdma/shift/internal/hiltest"
	"github.com/shift-rdma/shift/internal/tooltest"
)

// TestHILTools runs the unmodified-program matrix (ibv_rc_pingpong and perftest, both post
// APIs) through libmlx5-shift on real ConnectX ports: plain mode between the first two
// devices of SHIFT_HIL_DEVICES, and, with four, SHIFT mode with each default's backup (the
// preload object puts mlx5-shift ahead of Debian's libmlx5, which claims the same devices).
func TestHILTools(t *testing.T) {
	r := hiltest.Need(t, 2)
	tooltest.RequireTools(t, tooltest.MatrixPrograms()...)
	b := tooltest.BuildPlugin(t)
	h := tooltest.HardwareHost(b)
	gid, addr := r.SourceGID(t, r.Devices[0]), hilAddr(t, r.Devices[0])
	tools := withGID(tooltest.Matrix(), gid)
	t.Run("plain", func(t *testing.T) {
		tooltest.RunMatrix(t, tools, h, h, tooltest.Mode{Preload: true}, tooltest.Mode{Preload: true}, r.Devices[0], r.Devices[1], addr)
	})
	t.Run("shift", func(t *testing.T) {
		if len(r.Devices) < 4 {
			t.Skip("SHIFT mode needs four devices (host A default, backup, host B default, backup)")
		}
		d := r.Devices
		m := tooltest.Mode{Preload: true, Shift: d[0] + ":" + d[1] + "," + d[2] + ":" + d[3], Job: fmt.Sprintf("hil-%d", port()),
			Extra: []string{"SHIFT_GID_INDEX=" + strconv.Itoa(gid)}}
		tooltest.RunMatrix(t, tools, h, h, m, m, d[0], d[2], addr)
	})
}

// hilAddr is the first IPv4 address of dev's netdev: the server's address for the programs'
// out-of-band exchange.
func hilAddr(t *testing.T, dev string) string {
	nd, err := hiltest.Netdev(dev)
	if err != nil {
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName(nd)
	if err != nil {
		t.Fatal(err)
	}
	as, err := ifi.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatalf("%s (%s) has no IPv4 address for the programs' exchange", nd, dev)
	return ""
}

// withGID replaces the matrix's GID index (-g 0, the emulator's only GID) by gid and gives
// perftest the same index (-x).
func withGID(ts []tooltest.Tool, gid int) []tooltest.Tool {
	out := make([]tooltest.Tool, 0, len(ts))
	for _, tl := range ts {
		args := slices.Clone(tl.Args)
		if i := slices.Index(args, "-g"); i >= 0 && i+1 < len(args) {
			args[i+1] = strconv.Itoa(gid)
		} else {
			args = append(args, "-x", strconv.Itoa(gid))
		}
		tl.Args = args
		out = append(out, tl)
	}
	return out
}
