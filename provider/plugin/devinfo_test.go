package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// TestDevicesAndDevinfo: Debian's ibv_devices and ibv_devinfo list the emulated devices
// through the plugin, with the port state, link layer, MTU and GID table the emulated NIC
// has.
func TestDevicesAndDevinfo(t *testing.T) {
	tooltest.RequireTools(t, "ibv_devices", "ibv_devinfo")
	tooltest.RequireRoot(t)
	b := tooltest.BuildPlugin(t)
	ips := addrs(2)
	h := tooltest.NewHost(t, b, nil, emusysfs.Shift, devices(ips, "lo")...)
	out, err := h.Start(t, tooltest.Mode{}, "ibv_devices").Wait(30 * time.Second)
	if err != nil {
		t.Fatalf("ibv_devices: %v\n%s", err, out)
	}
	for _, d := range []string{"s0", "s1"} {
		if !strings.Contains(out, d) {
			t.Errorf("ibv_devices does not list %s:\n%s", d, out)
		}
	}
	out, err = h.Start(t, tooltest.Mode{}, "ibv_devinfo", "-v", "-d", "s1").Wait(30 * time.Second)
	if err != nil {
		t.Fatalf("ibv_devinfo: %v\n%s", err, out)
	}
	for _, want := range []string{"hca_id:\ts1", "vendor_part_id:\t\t\t4123", "board_id:\t\t\tSHIFT_EMULATED",
		"state:\t\t\tPORT_ACTIVE (4)", "link_layer:\t\tEthernet", "active_mtu:\t\t4096 (5)",
		"GID[  0]:\t\t::ffff:" + ips[1].String() + ", RoCE v2"} {
		if !strings.Contains(out, want) {
			t.Errorf("ibv_devinfo -v lacks %q:\n%s", want, out)
		}
	}
	// Without -d every device is opened: one process opens both, neither binds its
	// address (nothing is created on them).
	out, err = h.Start(t, tooltest.Mode{}, "ibv_devinfo").Wait(30 * time.Second)
	if err != nil || strings.Count(out, "hca_id:") != 2 {
		t.Fatalf("ibv_devinfo of all devices: %v\n%s", err, out)
	}
}
