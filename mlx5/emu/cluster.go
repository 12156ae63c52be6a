package emu

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
)

// ClusterConfig describes a set of emulated hosts joined by one in-process fabric: Hosts
// hosts with NICs HCAs each, every HCA with Ports ports. Port p of NIC n on host h has the
// IPv4 address 10.n.(p-1).(h+1) and so the RoCEv2 GID ::ffff:10.n.(p-1).(h+1): one subnet
// per NIC rail, as multi-rail RoCE clusters are wired. Its netdev is eth<n*Ports+p-1>.
type ClusterConfig struct {
	Hosts, NICs, Ports int // each defaults to 1 when 0 (Hosts to 2)
	// Fabric carries the packets; nil creates one with Seed and Clock (the caller then owns
	// neither: Cluster.Close closes it).
	Fabric *fabric.Fabric
	Seed   uint64
	Clock  clock.Clock
	// Caps overrides the devices' capabilities (nil: DefaultCaps).
	Caps *DeviceCaps
	// NetdevMTU is every port's netdev MTU (0: 9000).
	NetdevMTU int
	// Register makes every device visible through uverbs.Devices / uverbs.Open.
	Register bool
	// Prefix names the devices <Prefix><index>, index = host*NICs + nic; "" means "emlx5_".
	Prefix string
	// Kernel is every device's kernel ABI (KernelCurrent: all commands).
	Kernel KernelABI
	// Stepped makes the cluster a deterministic simulation's: no NIC watchers and no
	// delivery goroutines (a fabric the cluster creates is fabric.WithStepped); the caller
	// steps each NIC (Device.NIC().Step) and the fabric (Fabric.Step). Use it with a manual
	// Clock.
	Stepped bool
}

// Cluster is a set of emulated hosts on one fabric.
type Cluster struct {
	Fabric *fabric.Fabric
	Hosts  []*Host

	ownFabric   bool
	unregisters []func()
}

// Host is one emulated host: its HCAs, NIC 0 first.
type Host struct {
	Index   int
	Devices []*Device
}

// linkWatcher lets the NIC's ports follow the fabric endpoint's carrier (nic.LinkStateSource).
type linkWatcher struct{ *fabric.Endpoint }

func (l linkWatcher) OnLinkState(fn func(up bool)) {
	l.Watch(func(e fabric.LinkEvent) { fn(e.Up) })
}

// PortAddr is the IPv4 address of port (1-based) of NIC n on host h.
func PortAddr(h, n, port int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(n), byte(port - 1), byte(h + 1)})
}

// NewCluster builds the hosts, attaches every port to the fabric and starts the NICs.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Hosts == 0 {
		cfg.Hosts = 2
	}
	if cfg.NICs == 0 {
		cfg.NICs = 1
	}
	if cfg.Ports == 0 {
		cfg.Ports = 1
	}
	if cfg.Hosts > 254 || cfg.NICs > 255 || cfg.Ports > 255 || cfg.Hosts < 0 || cfg.NICs < 0 || cfg.Ports < 0 {
		return nil, fmt.Errorf("new cluster: %d hosts × %d NICs × %d ports out of range", cfg.Hosts, cfg.NICs, cfg.Ports)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "emlx5_"
	}
	c := &Cluster{Fabric: cfg.Fabric}
	if c.Fabric == nil {
		opts := []fabric.Option{fabric.WithSeed(cfg.Seed)}
		if cfg.Clock != nil {
			opts = append(opts, fabric.WithClock(cfg.Clock))
		}
		if cfg.Stepped {
			opts = append(opts, fabric.WithStepped())
		}
		c.Fabric = fabric.New(opts...)
		c.ownFabric = true
	}
	for h := range cfg.Hosts {
		host := &Host{Index: h}
		c.Hosts = append(c.Hosts, host)
		for n := range cfg.NICs {
			dc := DeviceConfig{Name: fmt.Sprintf("%s%d", cfg.Prefix, h*cfg.NICs+n), Caps: cfg.Caps, Clock: cfg.Clock, Kernel: cfg.Kernel, Stepped: cfg.Stepped}
			for p := 1; p <= cfg.Ports; p++ {
				ep, err := c.Fabric.Attach(PortAddr(h, n, p))
				if err != nil {
					return nil, errors.Join(err, c.Close())
				}
				dc.Ports = append(dc.Ports, PortConfig{Link: linkWatcher{ep}, Netdev: fmt.Sprintf("eth%d", n*cfg.Ports+p-1), NetdevMTU: cfg.NetdevMTU})
			}
			d, err := NewDevice(dc)
			if err != nil {
				for _, pc := range dc.Ports {
					pc.Link.Close()
				}
				return nil, errors.Join(err, c.Close())
			}
			host.Devices = append(host.Devices, d)
			if cfg.Register {
				un, err := d.Register()
				if err != nil {
					return nil, errors.Join(err, c.Close())
				}
				c.unregisters = append(c.unregisters, un)
			}
		}
	}
	return c, nil
}

// Endpoint returns the fabric endpoint of a port, for fault injection.
func (c *Cluster) Endpoint(h, n, port int) *fabric.Endpoint {
	return c.Fabric.Endpoint(PortAddr(h, n, port))
}

// Close unregisters and closes every device and, if the cluster created it, the fabric.
func (c *Cluster) Close() error {
	var errs []error
	for _, un := range c.unregisters {
		un()
	}
	c.unregisters = nil
	for _, h := range c.Hosts {
		for _, d := range h.Devices {
			errs = append(errs, d.Close())
		}
		h.Devices = nil
	}
	if c.ownFabric && c.Fabric != nil {
		errs = append(errs, c.Fabric.Close())
	}
	return errors.Join(errs...)
}
