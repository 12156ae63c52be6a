package main

import (
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

// emuDevice is an emulated ConnectX this process hosts: created on its first open, its link
// bound only when a QP is created on it (fabric.LazyUDPLink), so that a process that only
// queries the device (ibv_devinfo) can run beside the one that carries its traffic.
type emuDevice struct {
	info   uverbs.DeviceInfo
	ip     netip.Addr
	netdev string

	mu   sync.Mutex
	dev  *emu.Device
	link *fabric.LazyUDPLink
}

var emulated struct {
	once sync.Once
	err  error
	devs map[string]*emuDevice
}

// isEmulated reports whether a sysfs device is one of libmlx5-shift's emulated devices.
func isEmulated(root string, d uverbs.DeviceInfo) bool {
	if strings.HasPrefix(d.Modalias, emusysfs.ShiftModalias) {
		return true
	}
	_, err := os.Stat(filepath.Join(root, "class/infiniband", d.Name, "device", emusysfs.Marker))
	return err == nil
}

// registerEmulated makes every emulated device of the sysfs tree openable by name through
// package uverbs (provider.Open and failover's backups find them there), once per process.
func registerEmulated() error {
	emulated.once.Do(func() {
		s := uverbs.DefaultSysfs()
		devs, err := s.Devices()
		if err != nil {
			emulated.err = err
			return
		}
		root := s.Root
		if root == "" {
			root = "/sys"
		}
		emulated.devs = map[string]*emuDevice{}
		for _, d := range devs {
			if !isEmulated(root, d) {
				continue
			}
			e, err := newEmuDevice(d)
			if err != nil {
				emulated.err = err
				return
			}
			if _, err := uverbs.Register(d, e.open); err != nil {
				emulated.err = err
				return
			}
			emulated.devs[d.Name] = e
		}
	})
	return emulated.err
}

func newEmuDevice(d uverbs.DeviceInfo) (*emuDevice, error) {
	p, ok := d.Port(1)
	if !ok {
		return nil, fmt.Errorf("emulated device %s: no port 1 in sysfs", d.Name)
	}
	for _, g := range p.GIDs {
		if g.Type != "RoCE v2" {
			continue
		}
		if ip, ok := netip.AddrFromSlice(g.GID); ok {
			return &emuDevice{info: d, ip: ip.Unmap(), netdev: p.Netdev}, nil
		}
	}
	return nil, fmt.Errorf("emulated device %s: port 1 has no RoCE v2 GID in sysfs to take its address from", d.Name)
}

// open is the uverbs open of the device: the emulated NIC starts on first use.
func (e *emuDevice) open() (uverbs.File, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dev == nil {
		link, err := fabric.NewLazyUDP(e.ip)
		if err != nil {
			return nil, fmt.Errorf("emulated device %s at %v: %w", e.info.Name, e.ip, err)
		}
		mtu := 0
		if e.netdev != "" {
			if ifi, err := net.InterfaceByName(e.netdev); err == nil {
				mtu = ifi.MTU
			}
		}
		d, err := emu.NewDevice(emu.DeviceConfig{Name: e.info.Name,
			Ports: []emu.PortConfig{{Link: link, Netdev: e.netdev, NetdevMTU: mtu}}})
		if err != nil {
			link.Close()
			return nil, fmt.Errorf("emulated device %s: %w", e.info.Name, err)
		}
		e.dev, e.link = d, link
	}
	return e.dev.Open()
}

// activate binds the device's link: called before a QP is created on it, so that a device
// another process already carries traffic on fails there, with the reason.
func activateEmulated(name string) error {
	e := emulated.devs[name]
	if e == nil {
		return nil
	}
	e.mu.Lock()
	link := e.link
	e.mu.Unlock()
	if link == nil {
		return nil
	}
	if err := link.Activate(); err != nil {
		return fmt.Errorf("emulated device %s cannot take its address %v:4791 (another process carrying traffic on it?): %w", name, e.ip, err)
	}
	return nil
}
