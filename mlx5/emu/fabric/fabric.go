package fabric

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
)

// Fabric is an in-process RoCEv2 network: endpoints attach by IP address, and a packet sent
// by one is delivered to the endpoint whose address is its DstIP, through the sender's TX
// and the receiver's RX fault hooks. Each endpoint delivers on its own goroutine, one packet
// at a time. The zero value is not usable; call New.
type Fabric struct {
	clk     clock.Clock
	seed    uint64
	stepped bool

	tap atomic.Pointer[TapFunc]

	mu     sync.RWMutex
	eps    map[netip.Addr]*Endpoint
	closed bool
}

// Option configures a Fabric.
type Option func(*Fabric)

// WithClock makes the fabric time delays and reordering holds on c (clock.Real by default),
// so tests can drive delays with a manual clock.
func WithClock(c clock.Clock) Option { return func(f *Fabric) { f.clk = c } }

// WithSeed seeds every random fault decision (loss, jitter, random reordering). The same seed
// and the same sends give the same decisions. The default seed is 1.
func WithSeed(seed uint64) Option { return func(f *Fabric) { f.seed = seed } }

// WithStepped starts no delivery goroutines: packets wait in their endpoints' queues until
// the caller delivers them with Step, one at a time, as a deterministic simulation's
// scheduler does (with a manual clock: WithClock).
func WithStepped() Option { return func(f *Fabric) { f.stepped = true } }

// New returns an empty fabric.
func New(opts ...Option) *Fabric {
	f := &Fabric{clk: clock.Real{}, seed: 1, eps: map[netip.Addr]*Endpoint{}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Seed is the seed random faults are drawn from.
func (f *Fabric) Seed() uint64 { return f.seed }

// Attach creates the endpoint with address addr (IPv4-mapped IPv6 addresses are stored as
// IPv4), link up, and starts its delivery goroutine.
func (f *Fabric) Attach(addr netip.Addr) (*Endpoint, error) {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() {
		return nil, fmt.Errorf("fabric: attach %v: %w", addr, ErrBadAddr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, fmt.Errorf("fabric: attach %v: %w", addr, ErrClosed)
	}
	if _, ok := f.eps[addr]; ok {
		return nil, fmt.Errorf("fabric: attach %v: %w", addr, ErrAddrInUse)
	}
	h := fnv.New64a()
	b := addr.As16()
	h.Write(b[:])
	e := newEndpoint(f, addr, h.Sum64())
	f.eps[addr] = e
	return e, nil
}

// Endpoint returns the attached endpoint with address addr, or nil.
func (f *Fabric) Endpoint(addr netip.Addr) *Endpoint {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.eps[addr.Unmap()]
}

// Endpoints returns the attached endpoints, in no particular order.
func (f *Fabric) Endpoints() []*Endpoint {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Endpoint, 0, len(f.eps))
	for _, e := range f.eps {
		out = append(out, e)
	}
	return out
}

// Step delivers the one packet due soonest (due at or before the clock's now; among equal
// times the lowest endpoint address first, then arrival order) on the caller's goroutine,
// and reports whether there was one. Only a stepped fabric (WithStepped) delivers here.
func (f *Fabric) Step() bool {
	if !f.stepped {
		return false
	}
	now := f.clk.Now()
	var (
		best   *Endpoint
		bestAt time.Time
	)
	for _, e := range f.sortedEndpoints() {
		if at, ok := e.q.headAt(); ok && !at.After(now) && (best == nil || at.Before(bestAt)) {
			best, bestAt = e, at
		}
	}
	if best == nil {
		return false
	}
	return best.q.deliverHead()
}

// NextDue is when the soonest queued packet falls due, and false when none is queued.
func (f *Fabric) NextDue() (time.Time, bool) {
	var (
		next  time.Time
		found bool
	)
	for _, e := range f.sortedEndpoints() {
		if at, ok := e.q.headAt(); ok && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}

func (f *Fabric) sortedEndpoints() []*Endpoint {
	eps := f.Endpoints()
	slices.SortFunc(eps, func(a, b *Endpoint) int { return a.addr.Compare(b.addr) })
	return eps
}

func (f *Fabric) lookup(addr netip.Addr) *Endpoint {
	f.mu.RLock()
	e := f.eps[addr.Unmap()]
	f.mu.RUnlock()
	return e
}

func (f *Fabric) detach(e *Endpoint) {
	f.mu.Lock()
	if f.eps[e.addr] == e {
		delete(f.eps, e.addr)
	}
	f.mu.Unlock()
}

// Close closes every endpoint and waits for their goroutines; later Attach calls fail.
func (f *Fabric) Close() error {
	f.mu.Lock()
	f.closed = true
	eps := make([]*Endpoint, 0, len(f.eps))
	for _, e := range f.eps {
		eps = append(eps, e)
	}
	f.mu.Unlock()
	for _, e := range eps {
		e.Close()
	}
	return nil
}
