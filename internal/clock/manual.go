package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Manual is a clock that moves only when told to, for deterministic tests of timeouts and
// retransmission. Unlike Real, it runs due callbacks on the goroutine that calls Advance, in
// due-time order (ties in creation order), so when Advance returns every callback that became
// due has finished, including timers those callbacks armed within the advanced interval. The
// zero value is not usable; use NewManual.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers manualHeap
	fired  uint64
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current time; inside a callback run by Advance, the callback's due
// time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc arranges for f to run when the clock has been advanced by d (d <= 0: at the next
// Advance, even Advance(0)).
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d < 0 {
		d = 0
	}
	m.seq++
	t := &manualTimer{m: m, when: m.now.Add(d), seq: m.seq, f: f, index: -1}
	heap.Push(&m.timers, t)
	return t
}

// Advance moves the clock forward by d, running every callback that falls due on the way, and
// returns how many it ran.
func (m *Manual) Advance(d time.Duration) int {
	m.mu.Lock()
	end := m.now.Add(d)
	n := 0
	for len(m.timers) > 0 && !m.timers[0].when.After(end) {
		t := heap.Pop(&m.timers).(*manualTimer)
		if t.when.After(m.now) {
			m.now = t.when
		}
		m.fired++
		m.mu.Unlock()
		t.f()
		n++
		m.mu.Lock()
	}
	if end.After(m.now) {
		m.now = end
	}
	m.mu.Unlock()
	return n
}

// AdvanceToNext moves the clock to the earliest pending timer and runs the callbacks due then.
// It returns how far the clock moved and false when no timer is pending.
func (m *Manual) AdvanceToNext() (time.Duration, bool) {
	m.mu.Lock()
	if len(m.timers) == 0 {
		m.mu.Unlock()
		return 0, false
	}
	d := m.timers[0].when.Sub(m.now)
	m.mu.Unlock()
	if d < 0 {
		d = 0
	}
	m.Advance(d)
	return d, true
}

// NextAt is when the earliest pending timer falls due, and false when none is pending.
func (m *Manual) NextAt() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timers) == 0 {
		return time.Time{}, false
	}
	return m.timers[0].when, true
}

// Pending returns how many timers are armed and not yet run or stopped.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// Fired returns how many callbacks the clock has run since it was created.
func (m *Manual) Fired() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fired
}

type manualTimer struct {
	m     *Manual
	when  time.Time
	seq   uint64
	f     func()
	index int // position in the heap, -1 once run or stopped
}

// Stop removes the timer if it has not run; it reports whether it did.
func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.m.timers, t.index)
	return true
}

type manualHeap []*manualTimer

func (h manualHeap) Len() int { return len(h) }
func (h manualHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h manualHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *manualHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *manualHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
