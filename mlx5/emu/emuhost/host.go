// Package emuhost hosts, inside one process, the emulated ConnectX devices of a sysfs tree
// that `shiftctl emu up` wrote (package emusysfs): for a C program whose verbs provider is
// libmlx5-shift, or Debian's libmlx5 over the emulated kernel library. Each device's NIC
// (package emu) starts on its first open; its RoCEv2-over-UDP link binds the device's
// address only when the first QP is created, because one address serves one process: a
// process that only queries the device (ibv_devinfo) runs beside the one carrying its traffic.
package emuhost

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/uverbs"
)

// ErrAddressTaken is wrapped by the failure of a device's first QP when its link cannot bind
// the device's address (UDP 4791): another process carries traffic on the device, or the
// address is not local. The edges print it whatever their debug setting: the program's own
// message ("Unable to create QP") does not say why.
var ErrAddressTaken = errors.New("cannot take its RoCE address")

// Host is the emulated devices of one sysfs tree.
type Host struct {
	root string
	opts Options
	devs []*Device
}

// Device is one emulated device of the tree.
type Device struct {
	Info   uverbs.DeviceInfo
	IP     netip.Addr
	Netdev string

	kernel emu.KernelABI
	mu     sync.Mutex
	dev    *emu.Device
	link   *fabric.LazyUDPLink
}

// Options adjusts the emulated devices a Host serves.
type Options struct {
	// Kernel is the uverbs commands the emulated kernel offers (emu.KernelCurrent: all).
	Kernel emu.KernelABI
}

// Load finds the emulated devices of the sysfs tree s describes (uverbs.DefaultSysfs: the
// tree SYSFS_PATH names).
func Load(s uverbs.Sysfs, o Options) (*Host, error) {
	devs, err := s.Devices()
	if err != nil {
		return nil, err
	}
	h := &Host{root: s.Root, opts: o}
	if h.root == "" {
		h.root = "/sys"
	}
	for _, d := range devs {
		if !h.isEmulated(d) {
			continue
		}
		e, err := newDevice(d, o)
		if err != nil {
			return nil, err
		}
		h.devs = append(h.devs, e)
	}
	return h, nil
}

// isEmulated reports whether a sysfs device is an emulated one: the shift:emu modalias, or
// the marker file a ConnectX-identity device carries.
func (h *Host) isEmulated(d uverbs.DeviceInfo) bool {
	if strings.HasPrefix(d.Modalias, emusysfs.ShiftModalias) {
		return true
	}
	_, err := os.Stat(filepath.Join(h.root, "class/infiniband", d.Name, "device", emusysfs.Marker))
	return err == nil
}

// Devices are the emulated devices, in the tree's order.
func (h *Host) Devices() []*Device { return h.devs }

// Lookup is the device named name (its ibdev name, e.g. e0) or whose command device is name
// (uverbsN), or nil.
func (h *Host) Lookup(name string) *Device {
	for _, d := range h.devs {
		if d.Info.Name == name || d.Info.Uverbs == name {
			return d
		}
	}
	return nil
}

func newDevice(d uverbs.DeviceInfo, o Options) (*Device, error) {
	p, ok := d.Port(1)
	if !ok {
		return nil, fmt.Errorf("emulated device %s: no port 1 in sysfs", d.Name)
	}
	for _, g := range p.GIDs {
		if g.Type != "RoCE v2" {
			continue
		}
		if ip, ok := netip.AddrFromSlice(g.GID); ok {
			return &Device{Info: d, IP: ip.Unmap(), Netdev: p.Netdev, kernel: o.Kernel}, nil
		}
	}
	return nil, fmt.Errorf("emulated device %s: port 1 has no RoCE v2 GID in sysfs to take its address from", d.Name)
}

// Open opens the device's command file; the emulated NIC starts on the first open.
func (e *Device) Open() (*emu.File, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dev == nil {
		link, err := fabric.NewLazyUDP(e.IP)
		if err != nil {
			return nil, fmt.Errorf("emulated device %s at %v: %w", e.Info.Name, e.IP, err)
		}
		mtu := 0
		if e.Netdev != "" {
			if ifi, err := net.InterfaceByName(e.Netdev); err == nil {
				mtu = ifi.MTU
			}
		}
		d, err := emu.NewDevice(emu.DeviceConfig{Name: e.Info.Name,
			Ports:          []emu.PortConfig{{Link: link, Netdev: e.Netdev, NetdevMTU: mtu}},
			BeforeCreateQP: e.activate, Kernel: e.kernel})
		if err != nil {
			link.Close()
			return nil, fmt.Errorf("emulated device %s: %w", e.Info.Name, err)
		}
		e.dev, e.link = d, link
	}
	return e.dev.OpenFile()
}

// activate binds the device's link (idempotent): a device another process already carries
// traffic on fails here, with the reason.
func (e *Device) activate() error {
	if err := e.link.Activate(); err != nil {
		return fmt.Errorf("emulated device %s %w %v:4791 (another process carrying traffic on it?): %w", e.Info.Name, ErrAddressTaken, e.IP, err)
	}
	return nil
}

// OptionsFromEnv reads the Options the edges (the plugin, the emulated-kernel library) take
// from their environment: SHIFT_EMU_KERNEL (current, write-create or no-ioctl) picks the
// uverbs commands the emulated kernel offers.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	k, err := emu.ParseKernelABI(getenv("SHIFT_EMU_KERNEL"))
	if err != nil {
		return Options{}, fmt.Errorf("SHIFT_EMU_KERNEL: %w", err)
	}
	return Options{Kernel: k}, nil
}
