// Package hiltest is the hardware side of the hardware-in-the-loop (HIL) tests: which real
// devices the tests use (SHIFT_HIL_DEVICES, SHIFT_HIL_GID_INDEX) and how a test takes a
// device's link down and up (a real `ip link set down` of the port's netdev, over netlink).
// Every package's HIL tests take their devices from here, so that one environment runs the
// whole hardware matrix (`make hil`), and a test on emulated devices can drive the same
// bodies through the same names (Emulate).
package hiltest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/uverbs"
)

// Rack is the set of devices the HIL tests run on.
type Rack struct {
	// Devices are the names SHIFT_HIL_DEVICES lists, in order. Two devices are one pair
	// of connected ports (host A, host B); four are host A's default and backup NICs, then
	// host B's, with each default connected to the other default and each backup to the
	// other backup.
	Devices []string
	// GIDIndex is SHIFT_HIL_GID_INDEX, or -1: each device's preferred GID (the RoCE v2 GID of
	// its port's IPv4 address).
	GIDIndex int

	setLink func(dev string, up bool) error
}

var (
	overrideMu sync.Mutex
	override   func(dev string, up bool) error
)

// Need returns the rack of SHIFT_HIL_DEVICES when it names at least n devices, and skips
// t (saying what to set) otherwise.
func Need(t testing.TB, n int) *Rack {
	t.Helper()
	env := os.Getenv("SHIFT_HIL_DEVICES")
	if env == "" {
		t.Skipf("hardware-in-the-loop test: set SHIFT_HIL_DEVICES to %d mlx5 devices (%s); none set", n, layout(n))
	}
	devs := strings.Split(env, ",")
	if len(devs) < n {
		t.Skipf("hardware-in-the-loop test: needs %d devices (%s); SHIFT_HIL_DEVICES=%q names %d", n, layout(n), env, len(devs))
	}
	r := &Rack{Devices: devs, GIDIndex: -1}
	if g := os.Getenv("SHIFT_HIL_GID_INDEX"); g != "" {
		v, err := strconv.Atoi(g)
		if err != nil || v < 0 || v > 255 {
			t.Fatalf("SHIFT_HIL_GID_INDEX=%q: want a GID index 0..255", g)
		}
		r.GIDIndex = v
	}
	overrideMu.Lock()
	r.setLink = override
	overrideMu.Unlock()
	if r.setLink == nil {
		r.setLink = setNetdevLink
	}
	return r
}

func layout(n int) string {
	if n >= 4 {
		return "host A default, host A backup, host B default, host B backup"
	}
	return "two connected ports"
}

// SetLink takes the link of device dev's port 1 down (up false) or up. On hardware it sets
// the port's netdev administratively down or up, which is what an operator or a pulled cable
// does to RoCE traffic, and needs CAP_NET_ADMIN. A link taken down is brought up again when
// t ends.
func (r *Rack) SetLink(t testing.TB, dev string, up bool) {
	t.Helper()
	if err := r.setLink(dev, up); err != nil {
		t.Fatalf("set link of %s %s: %v", dev, map[bool]string{true: "up", false: "down"}[up], err)
	}
	if !up {
		t.Cleanup(func() {
			if err := r.setLink(dev, true); err != nil {
				t.Errorf("bringing %s back up: %v", dev, err)
			}
		})
	}
}

// Netdev is the netdev of port 1 of device dev, from sysfs.
func Netdev(dev string) (string, error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return "", err
	}
	for _, d := range devs {
		if d.Name != dev {
			continue
		}
		if p, ok := d.Port(1); ok && p.Netdev != "" {
			return p.Netdev, nil
		}
		return "", fmt.Errorf("hiltest: %s port 1 has no netdev (not RoCE?)", dev)
	}
	return "", fmt.Errorf("hiltest: no RDMA device %s", dev)
}

func setNetdevLink(dev string, up bool) error {
	name, err := Netdev(dev)
	if err != nil {
		return err
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("netdev %s of %s: %w", name, dev, err)
	}
	if up {
		return netlink.LinkSetUp(l)
	}
	return netlink.LinkSetDown(l)
}

// Emulate points the HIL tests of t at emulated devices: SHIFT_HIL_DEVICES names devs, the
// GID index is gid (negative: the preferred GID), and links are set with setLink (the
// emulated fabric's endpoints) instead of netlink, for the test's duration. It exercises the hardware path (devices chosen by
// name, GIDs from the environment, the bodies' hardware-safe checks) where there is none.
func Emulate(t *testing.T, devs []string, gid int, setLink func(dev string, up bool) error) {
	t.Setenv("SHIFT_HIL_DEVICES", strings.Join(devs, ","))
	g := ""
	if gid >= 0 {
		g = strconv.Itoa(gid)
	}
	t.Setenv("SHIFT_HIL_GID_INDEX", g)
	overrideMu.Lock()
	override = setLink
	overrideMu.Unlock()
	t.Cleanup(func() {
		overrideMu.Lock()
		override = nil
		overrideMu.Unlock()
	})
}

// SourceGID is the source GID index the tests use on port 1 of dev: SHIFT_HIL_GID_INDEX, else
// the device's preferred GID (provider.Context.SourceGID).
func (r *Rack) SourceGID(t testing.TB, dev string) int {
	t.Helper()
	if r.GIDIndex >= 0 {
		return r.GIDIndex
	}
	ctx, err := provider.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	g, err := ctx.SourceGID(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	return g.Index
}
