package fabric

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// Direction names one side of an endpoint's port.
type Direction uint8

// Directions.
const (
	TX Direction = iota // packets the endpoint sends
	RX                  // packets arriving for the endpoint
)

// String returns "tx" or "rx".
func (d Direction) String() string {
	if d == TX {
		return "tx"
	}
	return "rx"
}

// DefaultMaxHold is how long a packet held back for reordering waits for the packets meant
// to overtake it before it is released anyway: a reordered packet arrives late, never not
// at all.
const DefaultMaxHold = 10 * time.Millisecond

// Faults are the fault hooks of one direction of one endpoint. Every packet through that
// direction meets them in a fixed order: blackhole, filter, drop-next, ACK drops, random
// loss, delay, reordering. Random choices come from a generator seeded by the fabric's seed,
// the endpoint's address and the direction, and are drawn only by the hooks that are
// enabled, so the same seed, configuration and sequence of packets give the same outcome.
// The zero configuration passes every packet unchanged. Methods are safe for concurrent use.
type Faults struct {
	clk  clock.Clock
	next func(p *roce.Packet, at time.Time) // where surviving packets go
	drop func(p *roce.Packet)               // where held packets go when the endpoint closes

	mu          sync.Mutex
	rng         *rand.Rand
	blackhole   bool
	filter      func(*roce.Packet) bool
	dropNext    int
	dropAckNext int
	dropAcks    bool
	loss        float64
	delay       time.Duration
	jitter      time.Duration
	reorderNext int
	reorderRate float64
	reorderK    int
	maxHold     time.Duration
	lastAt      time.Time // latest delivery time given out: keeps delayed packets in order

	held     *roce.Packet
	heldAt   time.Time
	heldLeft int // packets still to pass before held is released
	holdGen  uint64
	timer    clock.Timer
	closed   bool
}

func newFaults(clk clock.Clock, seed1, seed2 uint64) *Faults {
	return &Faults{clk: clk, rng: rand.New(rand.NewPCG(seed1, seed2)), maxHold: DefaultMaxHold}
}

// SetBlackhole makes the direction lose every packet silently while on, with the link still
// reported up: a gray failure that only timeouts reveal.
func (f *Faults) SetBlackhole(on bool) { f.mu.Lock(); f.blackhole = on; f.mu.Unlock() }

// SetFilter installs a predicate that drops the packets for which it returns true (nil
// removes it). It runs under the direction's lock and must not call back into the fabric.
func (f *Faults) SetFilter(drop func(*roce.Packet) bool) { f.mu.Lock(); f.filter = drop; f.mu.Unlock() }

// DropNext drops the next n packets through this direction.
func (f *Faults) DropNext(n int) { f.mu.Lock(); f.dropNext = n; f.mu.Unlock() }

// DropNextAcks drops the next n packets that carry an AETH (ACKs, NAKs, atomic ACKs, read
// responses first/last/only) and passes the others.
func (f *Faults) DropNextAcks(n int) { f.mu.Lock(); f.dropAckNext = n; f.mu.Unlock() }

// SetDropAcks drops every AETH-carrying packet while on: data lands, its ACKs never return.
func (f *Faults) SetDropAcks(on bool) { f.mu.Lock(); f.dropAcks = on; f.mu.Unlock() }

// SetLoss drops each packet independently with probability rate (0 disables).
func (f *Faults) SetLoss(rate float64) { f.mu.Lock(); f.loss = rate; f.mu.Unlock() }

// SetDelay delays each packet by fixed plus a uniform random amount in [0, jitter). Packets
// through one direction stay in order: a packet is never delivered before an earlier one.
func (f *Faults) SetDelay(fixed, jitter time.Duration) {
	f.mu.Lock()
	f.delay, f.jitter = fixed, jitter
	f.mu.Unlock()
}

// ReorderNext holds the next packet back until k later packets have passed this direction
// (or MaxHold elapses), so they overtake it.
func (f *Faults) ReorderNext(k int) { f.mu.Lock(); f.reorderNext = k; f.mu.Unlock() }

// SetReorder holds each packet back with probability rate until k later packets have passed
// (or MaxHold elapses). One packet is held at a time.
func (f *Faults) SetReorder(rate float64, k int) {
	f.mu.Lock()
	f.reorderRate, f.reorderK = rate, k
	f.mu.Unlock()
}

// SetMaxHold bounds how long a packet held for reordering waits (DefaultMaxHold initially).
func (f *Faults) SetMaxHold(d time.Duration) { f.mu.Lock(); f.maxHold = d; f.mu.Unlock() }

// Reset removes every fault; a packet held for reordering is released now.
func (f *Faults) Reset() {
	f.mu.Lock()
	f.blackhole, f.filter, f.dropNext, f.dropAckNext, f.dropAcks = false, nil, 0, 0, false
	f.loss, f.delay, f.jitter, f.reorderNext, f.reorderRate, f.reorderK = 0, 0, 0, 0, 0, 0
	rel, at := f.takeHeldLocked()
	f.mu.Unlock()
	if rel != nil {
		f.next(rel, at)
	}
}

// process runs p through the hooks at time now. It reports whether p was dropped; a packet
// that survives is passed to next (possibly later, if held for reordering).
func (f *Faults) process(p *roce.Packet, now time.Time) (dropped bool) {
	f.mu.Lock()
	if f.closed || f.lose(p) {
		f.mu.Unlock()
		return true
	}
	at := now.Add(f.delay)
	if f.jitter > 0 {
		at = at.Add(time.Duration(f.rng.Int64N(int64(f.jitter))))
	}
	if at.Before(f.lastAt) {
		at = f.lastAt
	}
	f.lastAt = at
	if f.held == nil {
		k := 0
		if f.reorderNext > 0 {
			k, f.reorderNext = f.reorderNext, 0
		} else if f.reorderRate > 0 && f.rng.Float64() < f.reorderRate {
			k = f.reorderK
		}
		if k > 0 {
			f.held, f.heldAt, f.heldLeft = p, at, k
			f.holdGen++
			gen := f.holdGen
			f.timer = f.clk.AfterFunc(f.maxHold, func() { f.holdExpired(gen) })
			f.mu.Unlock()
			return false
		}
	}
	var rel *roce.Packet
	var relAt time.Time
	if f.held != nil {
		if f.heldLeft--; f.heldLeft <= 0 {
			rel, relAt = f.takeHeldLocked()
			if relAt.Before(at) {
				relAt = at
			}
		}
	}
	f.mu.Unlock()
	f.next(p, at)
	if rel != nil {
		f.next(rel, relAt)
	}
	return false
}

// lose decides whether p is dropped, consuming one-shot counts and random draws.
func (f *Faults) lose(p *roce.Packet) bool {
	switch {
	case f.blackhole:
		return true
	case f.filter != nil && f.filter(p):
		return true
	case f.dropNext > 0:
		f.dropNext--
		return true
	}
	if p.IsAck() {
		if f.dropAckNext > 0 {
			f.dropAckNext--
			return true
		}
		if f.dropAcks {
			return true
		}
	}
	return f.loss > 0 && f.rng.Float64() < f.loss
}

// takeHeldLocked removes the held packet, if any, and stops its timer.
func (f *Faults) takeHeldLocked() (*roce.Packet, time.Time) {
	p, at := f.held, f.heldAt
	if p != nil {
		f.held = nil
		f.holdGen++
		f.timer.Stop()
		f.timer = nil
	}
	return p, at
}

func (f *Faults) holdExpired(gen uint64) {
	f.mu.Lock()
	if f.holdGen != gen || f.held == nil || f.closed {
		f.mu.Unlock()
		return
	}
	p, at := f.takeHeldLocked()
	if now := f.clk.Now(); at.Before(now) {
		at = now
	}
	f.mu.Unlock()
	f.next(p, at)
}

// close drops a held packet and makes every later packet count as dropped.
func (f *Faults) close() {
	f.mu.Lock()
	f.closed = true
	p, _ := f.takeHeldLocked()
	f.mu.Unlock()
	if p != nil && f.drop != nil {
		f.drop(p)
	}
}
