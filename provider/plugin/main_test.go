package main

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/shift-rdma/shift/internal/tooltest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	tooltest.RemoveBuild()
	os.Exit(code)
}

// addrs returns n fresh loopback addresses (tooltest.LoopbackAddrs).
func addrs(n int) []netip.Addr { return tooltest.LoopbackAddrs(n) }

// port is a TCP port for one tool run (tooltest.Port).
func port() int { return tooltest.Port() }

// devices names n emulated devices s0..s<n-1> at addresses ips.
func devices(ips []netip.Addr, netdev string) []tooltest.Device {
	var out []tooltest.Device
	for i, ip := range ips {
		out = append(out, tooltest.Device{Name: fmt.Sprintf("s%d", i), IP: ip, Netdev: netdev})
	}
	return out
}

// harness builds the C harness bench/NAME.c (tooltest.Harness).
func harness(tb testing.TB, name string) string { return tooltest.Harness(tb, name) }
