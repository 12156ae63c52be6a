package fabric

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// LazyUDPLink is a UDPLink whose socket is bound only when the link is first used: by
// Activate, or by the first Send. Until then it follows the state of the interface holding
// its address, as a NIC's port follows its cable, but owns no UDP port.
//
// It lets a process emulate a NIC that it only queries (ibv_devinfo, ibv_devices) while
// another process of the host runs traffic on the same emulated NIC: only one socket can own
// addr:4791, and only a process that creates queue pairs needs it.
type LazyUDPLink struct {
	addr netip.Addr
	nd   *netdevState

	mu     sync.Mutex // serialises Activate, SetReceiver and Close
	l      atomic.Pointer[UDPLink]
	recv   func(*roce.Packet)
	closed bool
	err    error // the failed bind, kept so Send stops retrying
}

var _ roce.Link = (*LazyUDPLink)(nil)

// NewLazyUDP starts following the interface holding addr; it binds nothing yet. Call it on
// the thread whose network namespace the link belongs to, as ListenUDP.
func NewLazyUDP(addr netip.Addr) (*LazyUDPLink, error) {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() {
		return nil, fmt.Errorf("fabric: lazy udp %v: %w", addr, ErrBadAddr)
	}
	nd, err := watchNetdev(addr)
	if err != nil {
		return nil, fmt.Errorf("fabric: lazy udp %v: %w", addr, err)
	}
	return &LazyUDPLink{addr: addr, nd: nd}, nil
}

// Activate binds addr:4791 unless it is bound already. A failure (the address is not local,
// another process owns the port) is returned now and by every later call.
func (z *LazyUDPLink) Activate() error {
	if z.l.Load() != nil {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return fmt.Errorf("fabric: lazy udp %v: %w", z.addr, ErrClosed)
	}
	if z.l.Load() != nil {
		return nil
	}
	if z.err != nil {
		return z.err
	}
	l, err := listenUDP(z.addr, z.nd)
	if err != nil {
		z.err = err
		return err
	}
	l.SetReceiver(z.recv)
	z.l.Store(l)
	return nil
}

// Active reports whether the socket is bound.
func (z *LazyUDPLink) Active() bool { return z.l.Load() != nil }

// Send binds the link if it is not bound yet, then sends p; a link that cannot bind drops p
// (counted nowhere: it has no socket).
func (z *LazyUDPLink) Send(p *roce.Packet) {
	l := z.l.Load()
	if l == nil {
		if z.Activate() != nil {
			return
		}
		l = z.l.Load()
	}
	l.Send(p)
}

// SetReceiver installs fn for the bound link, now or when it binds.
func (z *LazyUDPLink) SetReceiver(fn func(*roce.Packet)) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.recv = fn
	if l := z.l.Load(); l != nil {
		l.SetReceiver(fn)
	}
}

// Addr is the address the link binds.
func (z *LazyUDPLink) Addr() netip.Addr { return z.addr }

// LinkUp reports whether the interface holding the address is up with carrier.
func (z *LazyUDPLink) LinkUp() bool { return z.nd.up.Load() }

// OnLinkState calls fn on every change of LinkUp (see UDPLink.OnLinkState).
func (z *LazyUDPLink) OnLinkState(fn func(up bool)) { z.nd.watch(func(e LinkEvent) { fn(e.Up) }) }

// Stats returns the bound link's counters (zero before it binds).
func (z *LazyUDPLink) Stats() Stats {
	if l := z.l.Load(); l != nil {
		return l.Stats()
	}
	return Stats{}
}

// Close releases the socket, if bound, and stops following the interface.
func (z *LazyUDPLink) Close() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return nil
	}
	z.closed = true
	var err error
	if l := z.l.Load(); l != nil {
		err = l.Close()
	}
	z.nd.close()
	return err
}
