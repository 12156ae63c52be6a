// Package rctest provides a minimal in-process link pair for testing the RC engine without the
// fabric: two roce.Link endpoints whose packets wait in per-endpoint queues until the test
// delivers them (Pump), so a test controls every interleaving; or, after Start, a goroutine per
// endpoint delivers them as they come. Fault hooks drop packets or take the link down.
package rctest

import (
	"net/netip"
	"sync"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// End is one endpoint of a Pair. It implements roce.Link.
type End struct {
	addr netip.Addr
	peer *End

	mu      sync.Mutex
	inbox   []*roce.Packet
	spare   []*roce.Packet // the previous batch's slice, reused so delivery does not allocate
	recv    func(*roce.Packet)
	down    bool
	closed  bool
	drop    func(*roce.Packet) bool
	reorder func([]*roce.Packet)
	sent    uint64
	lost    uint64
	notify  chan struct{}
}

var _ roce.Link = (*End)(nil)

// Pair is two connected endpoints.
type Pair struct {
	A, B *End
	wg   sync.WaitGroup
	stop chan struct{}
	once sync.Once
}

// NewPair returns two endpoints with the given addresses, connected to each other.
func NewPair(a, b netip.Addr) *Pair {
	p := &Pair{
		A:    &End{addr: a, notify: make(chan struct{}, 1)},
		B:    &End{addr: b, notify: make(chan struct{}, 1)},
		stop: make(chan struct{}),
	}
	p.A.peer, p.B.peer = p.B, p.A
	return p
}

// Send queues p at the peer unless this endpoint is down or closed or the drop hook says to
// lose it.
func (e *End) Send(p *roce.Packet) {
	e.mu.Lock()
	e.sent++
	lose := e.down || e.closed || (e.drop != nil && e.drop(p))
	if lose {
		e.lost++
	}
	e.mu.Unlock()
	if lose {
		return
	}
	peer := e.peer
	peer.mu.Lock()
	if peer.closed {
		peer.mu.Unlock()
		return
	}
	peer.inbox = append(peer.inbox, p)
	peer.mu.Unlock()
	select {
	case peer.notify <- struct{}{}:
	default:
	}
}

// SetReceiver installs the receive function.
func (e *End) SetReceiver(f func(*roce.Packet)) {
	e.mu.Lock()
	e.recv = f
	e.mu.Unlock()
}

// Addr returns the endpoint's address.
func (e *End) Addr() netip.Addr { return e.addr }

// Close detaches the endpoint: queued and later packets are dropped.
func (e *End) Close() error {
	e.mu.Lock()
	e.closed = true
	e.inbox = nil
	e.mu.Unlock()
	return nil
}

// SetDown takes the endpoint's transmit side down (packets sent while down are lost) or up.
func (e *End) SetDown(down bool) {
	e.mu.Lock()
	e.down = down
	e.mu.Unlock()
}

// SetDrop installs a hook called for every packet this endpoint sends; true loses it. The hook
// runs under the endpoint's lock and must not call back into the link.
func (e *End) SetDrop(f func(*roce.Packet) bool) {
	e.mu.Lock()
	e.drop = f
	e.mu.Unlock()
}

// SetReorder installs a hook that may permute each batch of packets before this endpoint
// delivers them to its receiver (a batch is what queued up since the last delivery).
func (e *End) SetReorder(f func([]*roce.Packet)) {
	e.mu.Lock()
	e.reorder = f
	e.mu.Unlock()
}

// Counts returns how many packets this endpoint was asked to send and how many it lost.
func (e *End) Counts() (sent, lost uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent, e.lost
}

// Queued returns how many packets wait for delivery to this endpoint.
func (e *End) Queued() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.inbox)
}

// deliver hands the queued packets to the receiver, in order, and returns how many.
func (e *End) deliver() int {
	e.mu.Lock()
	if len(e.inbox) == 0 {
		e.mu.Unlock()
		return 0
	}
	batch := e.inbox
	e.inbox = e.spare[:0]
	e.spare = nil
	f := e.recv
	if e.reorder != nil && len(batch) > 1 {
		e.reorder(batch)
	}
	e.mu.Unlock()
	if f != nil {
		for _, p := range batch {
			f(p)
		}
	}
	n := len(batch)
	clear(batch)
	e.mu.Lock()
	if !e.closed {
		e.spare = batch[:0]
	}
	e.mu.Unlock()
	return n
}

// Pump delivers queued packets on both endpoints, on the calling goroutine, until none are
// left, and returns how many it delivered. Use it only when Start has not been called.
func (p *Pair) Pump() int {
	total := 0
	for {
		n := p.A.deliver() + p.B.deliver()
		if n == 0 {
			return total
		}
		total += n
	}
}

// Start delivers packets from a goroutine per endpoint until Stop.
func (p *Pair) Start() {
	for _, e := range []*End{p.A, p.B} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case <-p.stop:
					return
				case <-e.notify:
					e.deliver()
				}
			}
		}()
	}
}

// Stop ends the delivery goroutines started by Start and waits for them.
func (p *Pair) Stop() {
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}
