package emu

import (
	"fmt"
	"hash/fnv"
	"net"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/uverbs"
)

// DeviceConfig describes an emulated HCA.
type DeviceConfig struct {
	// Name is the ibdev name, e.g. "emlx5_0". Register makes it visible to uverbs.Devices
	// and uverbs.Open.
	Name string
	// Ports are the device's ports, port 1 first.
	Ports []PortConfig
	// Caps are the reported and enforced limits; nil means DefaultCaps (a ConnectX-6).
	Caps *DeviceCaps
	// NodeGUID is the node GUID; 0 derives one from the name with the Mellanox OUI.
	NodeGUID uint64
	// Clock drives the RC timers; nil means real time.
	Clock clock.Clock
	// BeforeCreateQP, when set, runs before every QP creation; an error fails the
	// create_qp with it. A process hosting a device whose link binds lazily (one UDP address
	// per NIC, which only one process may hold) binds it here, so a process that only
	// queries the device never takes the address.
	BeforeCreateQP func() error
	// Kernel selects the uverbs commands the emulated kernel offers (KernelCurrent: all).
	Kernel KernelABI
	// Stepped runs no doorbell watcher: the caller steps the NIC (NIC().Step), as a
	// deterministic simulation does (nic.Config.Stepped).
	Stepped bool
}

// PortConfig describes one port.
type PortConfig struct {
	// Link attaches the port to a fabric; Link.Addr() is the IP of the port's RoCEv2 GID.
	Link roce.Link
	// Netdev is the name of the port's network device (reported with its GID).
	Netdev string
	// NetdevMTU is the netdev's MTU; 0 means 9000, whose RoCE active MTU is 4096.
	NetdevMTU int
}

// NodeGUIDFor is the node GUID a device called name gets when its config names none: the
// Mellanox OUI 00:02:c9, then 0x03 and a hash of the name, as ConnectX GUIDs look.
func NodeGUIDFor(name string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return 0x0002c90300000000 | uint64(h.Sum32())
}

// NewDevice creates an emulated HCA over the given links and starts its NIC. Close stops it.
func NewDevice(cfg DeviceConfig) (*Device, error) {
	if cfg.Name == "" || len(cfg.Ports) == 0 {
		return nil, fmt.Errorf("new device %q: a name and at least one port are required", cfg.Name)
	}
	d := &Device{
		name:     cfg.Name,
		caps:     DefaultCaps,
		nodeGUID: cfg.NodeGUID,
		files:    make(map[*File]struct{}),
		cqs:      make(map[uint32]*cqObj),
		qps:      make(map[uint32]*qpObj),
		beforeQP: cfg.BeforeCreateQP,
		kernel:   cfg.Kernel,
	}
	if cfg.Caps != nil {
		d.caps = *cfg.Caps
	}
	if d.nodeGUID == 0 {
		d.nodeGUID = NodeGUIDFor(cfg.Name)
	}
	var nports []nic.PortConfig
	for i, pc := range cfg.Ports {
		if pc.Link == nil {
			return nil, fmt.Errorf("new device %s: port %d has no link", cfg.Name, i+1)
		}
		mtu := pc.NetdevMTU
		if mtu == 0 {
			mtu = 9000
		}
		active := mtuForNetdev(mtu)
		if active == 0 {
			return nil, fmt.Errorf("new device %s: port %d netdev MTU %d too small for RoCE", cfg.Name, i+1, mtu)
		}
		d.ports = append(d.ports, &Port{Num: i + 1, IP: pc.Link.Addr(), Netdev: pc.Netdev, NetdevMTU: mtu})
		nports = append(nports, nic.PortConfig{Link: pc.Link, MTU: active.Bytes()})
	}
	ev := d.events()
	nd, err := nic.New(nic.Config{Name: cfg.Name, Ports: nports, Clock: cfg.Clock, Stepped: cfg.Stepped,
		OnPortState: func(port int, up bool) { ev.portChange(port, up) },
		OnFatal:     func() { ev.fatal() }})
	if err != nil {
		return nil, fmt.Errorf("new device %s: %w", cfg.Name, err)
	}
	d.hw = &nicHW{d: nd, ev: ev, cqs: make(map[uint32]*nic.CQ), qps: make(map[uint32]*nic.QP)}
	d.nic = nd
	return d, nil
}

// NIC returns the device model behind the driver (for fault injection and statistics).
func (d *Device) NIC() *nic.Device { return d.nic }

// Info describes the device as uverbs discovery does for real devices.
func (d *Device) Info() uverbs.DeviceInfo {
	info := uverbs.DeviceInfo{
		Name:       d.name,
		ABIVersion: 1, // MLX5_IB_UVERBS_ABI_VERSION
		NodeGUID:   fmt.Sprintf("%04x:%04x:%04x:%04x", d.nodeGUID>>48, d.nodeGUID>>32&0xffff, d.nodeGUID>>16&0xffff, d.nodeGUID&0xffff),
		NodeType:   "1: CA",
	}
	for _, p := range d.ports {
		pi := uverbs.PortInfo{Num: p.Num, LinkLayer: "Ethernet", Netdev: p.Netdev}
		if d.hw.portUp(p.Num) {
			pi.State, pi.StateName, pi.PhysState = uverbs.PortActive, "ACTIVE", "5: LinkUp"
		} else {
			pi.State, pi.StateName, pi.PhysState = uverbs.PortDown, "DOWN", "3: Disabled"
		}
		g := p.GID()
		pi.GIDs = []uverbs.GIDInfo{{Index: 0, GID: net.IP(g[:]), Type: "RoCE v2", Netdev: p.Netdev}}
		info.Ports = append(info.Ports, pi)
	}
	return info
}

// Register makes the device visible to uverbs.Devices and openable by name with
// uverbs.Open, like a real device. The returned function removes it.
func (d *Device) Register() (unregister func(), err error) {
	return uverbs.Register(d.Info(), d.Open)
}
