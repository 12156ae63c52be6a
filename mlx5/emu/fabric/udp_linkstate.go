package fabric

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netdevState follows the link state of the network interface a UDPLink is bound on, through
// rtnetlink link notifications in the link's network namespace, as the mlx5 driver follows
// its netdev to raise port events: the port is up while the interface is administratively up
// and has carrier (IFF_UP and IFF_RUNNING). The kernel's link watch can delay a carrier
// change by up to a second for physical-looking interfaces, so this is as late as a real
// port event, never earlier.
type netdevState struct {
	ifindex int
	up      atomic.Bool

	mu       sync.Mutex // orders notifications
	watchers map[uint64]func(LinkEvent)
	seq      uint64
	addr     netip.Addr

	done    chan struct{}
	stopped chan struct{}
}

// interfaceOf returns the index of the interface in the current network namespace that
// holds addr or, for an address no interface holds but the host accepts (127.0.0.0/8), the
// interface the kernel routes it through.
func interfaceOf(addr netip.Addr) (int, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, err
	}
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			return 0, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
					return ifi.Index, nil
				}
			}
		}
	}
	routes, err := netlink.RouteGet(addr.AsSlice())
	if err != nil {
		// Both stay inspectable: ErrBadAddr for callers, the netlink errno for diagnosis.
		return 0, fmt.Errorf("no interface holds %v: %w (route lookup: %w)", addr, ErrBadAddr, err)
	}
	if len(routes) == 0 || routes[0].LinkIndex == 0 {
		return 0, fmt.Errorf("no interface holds %v and no route leads to one: %w", addr, ErrBadAddr)
	}
	return routes[0].LinkIndex, nil
}

// watchNetdev subscribes to link notifications in the calling thread's network namespace
// for the interface holding addr.
func watchNetdev(addr netip.Addr) (*netdevState, error) {
	idx, err := interfaceOf(addr)
	if err != nil {
		return nil, err
	}
	s := &netdevState{ifindex: idx, addr: addr, watchers: map[uint64]func(LinkEvent){},
		done: make(chan struct{}), stopped: make(chan struct{})}
	link, err := netlink.LinkByIndex(idx)
	if err != nil {
		return nil, fmt.Errorf("link %d: %w", idx, err)
	}
	s.up.Store(linkUp(link.Attrs().RawFlags))
	ch := make(chan netlink.LinkUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(ch, s.done, netlink.LinkSubscribeOptions{ListExisting: true}); err != nil {
		return nil, fmt.Errorf("subscribe to link %d: %w", idx, err)
	}
	go s.run(ch)
	return s, nil
}

func linkUp(flags uint32) bool { return flags&unix.IFF_UP != 0 && flags&unix.IFF_RUNNING != 0 }

func (s *netdevState) run(ch <-chan netlink.LinkUpdate) {
	defer close(s.stopped)
	for u := range ch { // closed by netlink when done closes
		if int(u.Index) != s.ifindex {
			continue
		}
		up := linkUp(u.Flags)
		if u.Header.Type == unix.RTM_DELLINK {
			up = false
		}
		s.mu.Lock()
		if s.up.Swap(up) != up {
			ev := LinkEvent{Addr: s.addr, Up: up}
			for _, k := range slices.Sorted(maps.Keys(s.watchers)) {
				s.watchers[k](ev)
			}
		}
		s.mu.Unlock()
	}
}

func (s *netdevState) watch(fn func(LinkEvent)) func() {
	s.mu.Lock()
	s.seq++
	k := s.seq
	s.watchers[k] = fn
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.watchers, k)
		s.mu.Unlock()
	}
}

func (s *netdevState) close() {
	close(s.done)
	<-s.stopped
}
