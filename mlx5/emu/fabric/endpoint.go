package fabric

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// Endpoint is one port attached to a Fabric. It implements roce.Link.
type Endpoint struct {
	f    *Fabric
	addr netip.Addr
	tx   *Faults
	rx   *Faults
	q    *queue
	ctr  counters

	up      atomic.Bool
	closed  atomic.Bool
	recv    atomic.Pointer[func(*roce.Packet)]
	invalid atomic.Pointer[error]

	linkMu   sync.Mutex // orders link transitions and their notifications
	watchers map[uint64]func(LinkEvent)
	watchSeq uint64
	closeMu  sync.Mutex
}

var _ roce.Link = (*Endpoint)(nil)

// LinkEvent is a change of an endpoint's link state.
type LinkEvent struct {
	Addr netip.Addr
	Up   bool
}

func newEndpoint(f *Fabric, addr netip.Addr, h uint64) *Endpoint {
	e := &Endpoint{f: f, addr: addr, watchers: map[uint64]func(LinkEvent){}}
	e.tx = newFaults(f.clk, f.seed, h<<1|uint64(TX))
	e.rx = newFaults(f.clk, f.seed, h<<1|uint64(RX))
	e.tx.next = e.afterTX
	e.tx.drop = func(*roce.Packet) { e.ctr.txDropped.Add(1) }
	e.q = newQueue(f.clk, e.deliver, func(*roce.Packet) { e.ctr.rxDropped.Add(1) })
	e.rx.next = e.q.push
	e.rx.drop = func(*roce.Packet) { e.ctr.rxDropped.Add(1) }
	e.up.Store(true)
	if f.stepped {
		close(e.q.done) // no goroutine: Fabric.Step delivers
	} else {
		go e.q.run()
	}
	return e
}

// Addr is the endpoint's IP address.
func (e *Endpoint) Addr() netip.Addr { return e.addr }

// Faults returns the fault hooks of one direction of this endpoint.
func (e *Endpoint) Faults(d Direction) *Faults {
	if d == TX {
		return e.tx
	}
	return e.rx
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats { return e.ctr.snapshot() }

// InvalidError returns why the latest refused packet could not be sent (nil if none was).
func (e *Endpoint) InvalidError() error {
	if p := e.invalid.Load(); p != nil {
		return *p
	}
	return nil
}

// SetReceiver installs fn as the function called, on the endpoint's delivery goroutine, for
// every packet that arrives; nil discards arrivals (counted as RX drops).
func (e *Endpoint) SetReceiver(fn func(*roce.Packet)) {
	if fn == nil {
		e.recv.Store(nil)
		return
	}
	e.recv.Store(&fn)
}

// Send transmits p toward p.DstIP and takes ownership of it. p.SrcIP is set to the
// endpoint's address. It never blocks on delivery; losses are counted, not reported. A
// packet that could not be marshalled (headers that do not match its opcode, a bad
// destination) is refused as the UDP link would refuse it, counted in TxInvalid, and its
// error kept for InvalidError, so the in-process fabric catches what the wire would.
func (e *Endpoint) Send(p *roce.Packet) {
	if e.closed.Load() || !e.up.Load() {
		e.ctr.txDropped.Add(1)
		return
	}
	p.SrcIP = e.addr
	if err := p.Validate(); err != nil {
		e.setInvalid(fmt.Errorf("fabric: send from %v: %w", e.addr, err))
		e.ctr.txInvalid.Add(1)
		e.ctr.txDropped.Add(1)
		return
	}
	p.BTH.PadCount = uint8(-len(p.Payload) & 3) // as the wire encoding derives it
	e.ctr.txPackets.Add(1)
	e.ctr.txBytes.Add(uint64(len(p.Payload)))
	e.f.tapped(TapSent, p)
	if e.tx.process(p, e.f.clk.Now()) {
		e.ctr.txDropped.Add(1)
	}
}

// setInvalid keeps err for InvalidError; a separate function so that Send's own error
// variable stays on the stack.
func (e *Endpoint) setInvalid(err error) { e.invalid.Store(&err) }

// afterTX carries a packet that left this endpoint's TX hooks to its destination.
func (e *Endpoint) afterTX(p *roce.Packet, at time.Time) {
	dst := e.f.lookup(p.DstIP)
	if dst == nil {
		e.ctr.txDropped.Add(1)
		return
	}
	if dst.closed.Load() || !dst.up.Load() {
		dst.ctr.rxDropped.Add(1)
		return
	}
	if dst.rx.process(p, at) {
		dst.ctr.rxDropped.Add(1)
	}
}

// deliver hands p to the receiver, on the delivery goroutine.
func (e *Endpoint) deliver(p *roce.Packet) {
	fn := e.recv.Load()
	if fn == nil || !e.up.Load() || e.closed.Load() {
		e.ctr.rxDropped.Add(1)
		return
	}
	e.ctr.rxPackets.Add(1)
	e.ctr.rxBytes.Add(uint64(len(p.Payload)))
	e.f.tapped(TapDelivered, p)
	(*fn)(p)
}

// LinkUp reports the link state.
func (e *Endpoint) LinkUp() bool { return e.up.Load() }

// SetLinkUp sets the link state, as pulling or plugging the cable does: while down, nothing
// is sent and arrivals, including packets already in flight, are lost. On a change, every
// watcher is called synchronously, in order of the changes.
func (e *Endpoint) SetLinkUp(up bool) {
	e.linkMu.Lock()
	defer e.linkMu.Unlock()
	if e.up.Swap(up) == up {
		return
	}
	ev := LinkEvent{Addr: e.addr, Up: up}
	for _, seq := range sortedKeys(e.watchers) {
		e.watchers[seq](ev)
	}
}

// Watch calls fn on every later link state change of this endpoint (from the goroutine that
// makes the change; fn must not change this endpoint's link state itself) until cancel is
// called. Watchers run in the order they were added.
func (e *Endpoint) Watch(fn func(LinkEvent)) (cancel func()) {
	e.linkMu.Lock()
	e.watchSeq++
	seq := e.watchSeq
	e.watchers[seq] = fn
	e.linkMu.Unlock()
	return func() {
		e.linkMu.Lock()
		delete(e.watchers, seq)
		e.linkMu.Unlock()
	}
}

// Close detaches the endpoint, drops queued and held packets, and waits for its delivery
// goroutine to end. It is idempotent; it must not be called from the receiver.
func (e *Endpoint) Close() error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closed.Swap(true) {
		return nil
	}
	e.f.detach(e)
	e.tx.close()
	e.rx.close()
	e.q.close()
	return nil
}

// String names the endpoint for diagnostics.
func (e *Endpoint) String() string { return fmt.Sprintf("fabric endpoint %v", e.addr) }

func sortedKeys(m map[uint64]func(LinkEvent)) []uint64 {
	return slices.Sorted(maps.Keys(m))
}
