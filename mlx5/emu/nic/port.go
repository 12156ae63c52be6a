package nic

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// LinkStateSource is implemented by links that report their carrier (the in-process fabric's
// endpoints, a UDP link watching its netdev). A port on such a link follows it: ACTIVE while
// the carrier is up, DOWN otherwise. Links without it are taken as always up, and the owner
// may drive the port with SetLinkUp.
type LinkStateSource interface {
	// LinkUp reports the current carrier state.
	LinkUp() bool
	// OnLinkState registers a function called on every carrier change; the device calls it
	// once per port, when it is created. It must not block. Changes reported after the
	// device is closed are ignored.
	OnLinkState(func(up bool))
}

// Port is one port of the device: a link to the fabric, the RoCEv2 GID it carries (the link's
// address), its active MTU and its state.
type Port struct {
	num    int
	dev    *Device
	link   roce.Link
	mtu    int
	up     atomic.Bool
	notify func(port int, up bool)
	mu     sync.Mutex // serialises state changes so callbacks arrive in order
}

// Num is the port number (1-based).
func (p *Port) Num() int { return p.num }

// Link is the port's link.
func (p *Port) Link() roce.Link { return p.link }

// Addr is the IP address of the port's RoCEv2 GID.
func (p *Port) Addr() netip.Addr { return p.link.Addr() }

// MTU is the port's active MTU in bytes.
func (p *Port) MTU() int { return p.mtu }

// Active reports whether the port is ACTIVE (IBV_PORT_ACTIVE) rather than DOWN.
func (p *Port) Active() bool { return p.up.Load() }

// SetLinkUp records a carrier change of the port's link and reports it through the device's
// OnPortState callback when the state actually changes. Links implementing LinkStateSource
// call it by themselves.
func (p *Port) SetLinkUp(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dev.Health() == Dead {
		up = false // a dead device's ports stay down whatever the link does
	}
	if p.up.Swap(up) == up {
		return
	}
	idle.hot()
	if p.notify != nil && !p.dev.closed.Load() {
		p.notify(p.num, up)
	}
}

// attach installs the device as the link's receiver and starts following its state.
func (p *Port) attach() {
	p.link.SetReceiver(p.dev.receive)
	if s, ok := p.link.(LinkStateSource); ok {
		p.up.Store(s.LinkUp())
		s.OnLinkState(p.SetLinkUp)
	} else {
		p.up.Store(true)
	}
}

// detach stops receiving; packets still arriving are dropped. Carrier changes still
// reported by the link are ignored once the device is closed (SetLinkUp checks it).
func (p *Port) detach() {
	p.link.SetReceiver(func(*roce.Packet) {})
}
