package fabric

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5/emu/clock"
)

// Fabric is an in-process RoCEv2 network: endpoints attach by IP address, and a packet sent
// by one is delivered to the endpoint whose address is its DstIP, through the sender's TX
// and the receiver's RX fault hooks. Each endpoint delivers on its own goroutine, one packet
// at a time. The zero value is not usable; call New.
type Fabric struct {
	clk  clock.Clock
	seed uint64

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
