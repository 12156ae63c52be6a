package tooltest

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// Host is a set of emulated devices in one sysfs tree, seen by programs started in NS (nil:
// this process's namespace), or this machine's real devices (Tree nil, HardwareHost).
type Host struct {
	Build *Build
	Tree  *emusysfs.Tree
	NS    *netnstest.NS
}

// Device names an emulated device and its address.
type Device struct {
	Name   string
	IP     netip.Addr
	Netdev string // "" omits the GID's netdev (a loopback address has lo)
}

// HardwareHost is this machine's real RDMA devices, as libibverbs finds them in /sys.
func HardwareHost(b *Build) *Host { return &Host{Build: b} }

// NewHost writes the tree for devs (identity id) into a temporary directory and removes it,
// with its stand-ins, at the end of the test. It needs root.
func NewHost(t testing.TB, b *Build, ns *netnstest.NS, id emusysfs.Identity, devs ...Device) *Host {
	t.Helper()
	RequireRoot(t)
	var ed []emusysfs.Device
	for _, d := range devs {
		ed = append(ed, emusysfs.Device{Name: d.Name, IP: d.IP, Netdev: d.Netdev, Identity: id})
	}
	root := filepath.Join(t.TempDir(), "sysfs")
	tr, err := emusysfs.Create(root, ed, emusysfs.Options{})
	if err != nil {
		t.Fatalf("tooltest: %v", err)
	}
	t.Cleanup(func() {
		if err := tr.Remove(); err != nil {
			t.Errorf("tooltest: remove the emulated devices: %v", err)
		}
	})
	return &Host{Build: b, Tree: tr, NS: ns}
}

// Mode says how a program reaches the devices.
type Mode struct {
	// Shift turns SHIFT on with SHIFT_BACKUP (default:backup pairs); empty is plain mode.
	Shift string
	// Job is SHIFT_JOB (each test its own, so that no entry of another run is found).
	Job string
	// KVDir, when set, is the directory of the KV store (SHIFT_KV=dir:...); empty uses
	// the embedded default.
	KVDir string
	// Preload adds LD_PRELOAD of the preload object (completion channels, a program that
	// links libmlx5).
	Preload bool
	// NoDrivers leaves RDMAV_DRIVERS out (the preload object alone loads the plugin).
	NoDrivers bool
	// Kernel runs the program on Debian's own libmlx5 instead of the plugin: the emulated
	// kernel library is preloaded (no RDMAV_DRIVERS, no preload object; the devices need a
	// ConnectX identity for libmlx5 to claim them). SHIFT settings do not apply.
	Kernel bool
	// Extra are further NAME=VALUE entries (SHIFT_LINK_WATCH=1, ...).
	Extra []string
}

// Env is the environment of a program on the host's devices: this process's, minus
// anything that selects providers or SHIFT, plus the host's.
func (h *Host) Env(m Mode) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch name := kv[:max(0, indexByte(kv, '='))]; {
		case name == "SYSFS_PATH", name == "RDMAV_DRIVERS", name == "IBV_DRIVERS", name == "LD_PRELOAD",
			len(name) >= 5 && name[:5] == "SHIFT":
			continue
		}
		env = append(env, kv)
	}
	if h.Tree != nil {
		env = append(env, "SYSFS_PATH="+h.Tree.Root)
	}
	if m.Kernel {
		return append(append(env, "LD_PRELOAD="+h.Build.EmuKernel), m.Extra...)
	}
	if !m.NoDrivers {
		env = append(env, "RDMAV_DRIVERS="+filepath.Join(h.Build.Dir, "libmlx5-shift"))
	}
	if m.Preload {
		env = append(env, "LD_PRELOAD="+h.Build.Preload, "SHIFT_PLUGIN="+h.Build.Plugin)
	}
	if m.Shift != "" {
		env = append(env, "SHIFT_BACKUP="+m.Shift)
		if m.Job != "" {
			env = append(env, "SHIFT_JOB="+m.Job)
		}
		if m.KVDir != "" {
			env = append(env, "SHIFT_KV=dir:"+m.KVDir)
		}
	}
	return append(env, m.Extra...)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// String names the host for diagnostics.
func (h *Host) String() string {
	ns := "this namespace"
	if h.NS != nil {
		ns = h.NS.Name
	}
	if h.Tree == nil {
		return "this machine's RDMA devices (" + ns + ")"
	}
	return fmt.Sprintf("%d devices in %s (%s)", len(h.Tree.Devices), h.Tree.Root, ns)
}
