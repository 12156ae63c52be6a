package fabric

import (
	"container/heap"
	"sync"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/clock"
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
	items   itemHeap
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

type itemHeap []item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = item{}
	*h = old[:len(old)-1]
	return it
}

func newQueue(clk clock.Clock, deliver, drop func(*roce.Packet)) *queue {
	return &queue{clk: clk, deliver: deliver, drop: drop,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// push queues p for delivery at time at.
func (q *queue) push(p *roce.Packet, at time.Time) {
	q.mu.Lock()
	if q.closed || len(q.items) >= MaxQueued {
		q.mu.Unlock()
		q.drop(p)
		return
	}
	q.seq++
	heap.Push(&q.items, item{p: p, at: at, seq: q.seq})
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
		if len(q.items) > 0 {
			head := q.items[0]
			now := q.clk.Now()
			if !head.at.After(now) {
				heap.Pop(&q.items)
				q.mu.Unlock()
				q.deliver(head.p)
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
	items := q.items
	q.items = nil
	q.mu.Unlock()
	close(q.stop)
	<-q.done
	for _, it := range items {
		q.drop(it.p)
	}
}
