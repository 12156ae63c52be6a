package main

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shift-rdma/shift/internal/tooltest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	tooltest.RemoveBuild()
	os.Exit(code)
}

// addrs returns n loopback addresses of a /24 no other run is likely to use (127.x.y.0/24
// with x, y random): each emulated NIC binds its address's UDP port 4791.
func addrs(n int) []netip.Addr {
	x, y := byte(100+rand.IntN(100)), byte(rand.IntN(256))
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{127, x, y, byte(i + 1)})
	}
	return out
}

// port is a TCP port for one tool run (the tools' own default, 18515, may be taken).
func port() int { return 20000 + rand.IntN(20000) }

// devices names n emulated devices s0..s<n-1> at addresses ips.
func devices(ips []netip.Addr, netdev string) []tooltest.Device {
	var out []tooltest.Device
	for i, ip := range ips {
		out = append(out, tooltest.Device{Name: fmt.Sprintf("s%d", i), IP: ip, Netdev: netdev})
	}
	return out
}

// harness builds the C program bench/NAME.c against libibverbs, or skips the test when gcc
// or libibverbs-dev is missing.
func harness(tb testing.TB, name string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), name)
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, "bench/"+name+".c", "-libverbs").CombinedOutput(); err != nil {
		tb.Skipf("building bench/%s.c needs gcc and libibverbs-dev: %v\n%s", name, err, out)
	}
	return bin
}
