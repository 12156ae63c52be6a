package fabric

import (
	"sync"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// MaxQueued bounds the packets waiting for delivery at one endpoint; beyond it arrivals are
// dropped, as a NIC drops when its receive buffer overflows.
const MaxQueued = 1 << 16

// queue holds the packets on their way to one endpoint, ordered by delivery time and then
// arrival, and delivers them from its own goroutine.
type queue struct {
	clk     clock.Clock
	deliver func(*roce.Packet)
	drop    func(*roce.Packet)

	mu      sync.Mutex
	items   itemQueue
	seq     uint64
	closed  bool
	timer   clock.Timer
	timerAt time.Time

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

type item struct {
	p   *roce.Packet
	at  time.Time
	seq uint64
}

// itemQueue is a slice kept sorted by delivery time, then arrival. Delivery times almost
// always arrive in order (per-direction delays keep them monotonic), so an insertion from
// the tail costs O(1) and nothing is boxed, unlike container/heap.
type itemQueue struct {
	items []item
	head  int
}

func (q *itemQueue) len() int { return len(q.items) - q.head }

func (q *itemQueue) push(it item) {
	q.items = append(q.items, it)
	for i := len(q.items) - 1; i > q.head && q.items[i].at.Before(q.items[i-1].at); i-- {
		q.items[i], q.items[i-1] = q.items[i-1], q.items[i]
	}
}

func (q *itemQueue) peek() *item { return &q.items[q.head] }

func (q *itemQueue) pop() item {
	it := q.items[q.head]
	q.items[q.head] = item{}
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head > 1024 && q.head > len(q.items)/2:
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return it
}

// drain removes and returns every item.
func (q *itemQueue) drain() []item {
	out := append([]item(nil), q.items[q.head:]...)
	q.items, q.head = nil, 0
	return out
}

func newQueue(clk clock.Clock, deliver, drop func(*roce.Packet)) *queue {
	return &queue{clk: clk, deliver: deliver, drop: drop,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// push queues p for delivery at time at.
func (q *queue) push(p *roce.Packet, at time.Time) {
	q.mu.Lock()
	if q.closed || q.items.len() >= MaxQueued {
		q.mu.Unlock()
		q.drop(p)
		return
	}
	q.seq++
	q.items.push(item{p: p, at: at, seq: q.seq})
	q.mu.Unlock()
	q.signal()
}

// timerFired forgets the fired timer, so the loop re-arms if the head is still early, and
// wakes the loop.
func (q *queue) timerFired() {
	q.mu.Lock()
	q.timer = nil
	q.mu.Unlock()
	q.signal()
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run is the delivery goroutine.
func (q *queue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return
		}
		if q.items.len() > 0 {
			head := q.items.peek()
			now := q.clk.Now()
			if !head.at.After(now) {
				it := q.items.pop()
				q.mu.Unlock()
				q.deliver(it.p)
				continue
			}
			if q.timer == nil || !q.timerAt.Equal(head.at) {
				if q.timer != nil {
					q.timer.Stop()
				}
				q.timerAt = head.at
				q.timer = q.clk.AfterFunc(head.at.Sub(now), q.timerFired)
			}
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.stop:
		}
	}
}

// headAt is when the first queued packet falls due (stepped fabrics).
func (q *queue) headAt() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.items.len() == 0 {
		return time.Time{}, false
	}
	return q.items.peek().at, true
}

// deliverHead delivers the first queued packet on the caller's goroutine (stepped fabrics).
func (q *queue) deliverHead() bool {
	q.mu.Lock()
	if q.closed || q.items.len() == 0 {
		q.mu.Unlock()
		return false
	}
	it := q.items.pop()
	q.mu.Unlock()
	q.deliver(it.p)
	return true
}

// close stops the goroutine, waits for it, and drops what was queued.
func (q *queue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		<-q.done
		return
	}
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	items := q.items.drain()
	q.mu.Unlock()
	close(q.stop)
	<-q.done
	for _, it := range items {
		q.drop(it.p)
	}
}
