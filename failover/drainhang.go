package failover

import "time"

// A drain that finds the default device hung (docs/FAILOVER.md "Dead NICs"). A fallback moves
// the default QP to ERR before it drains it, and a working device then flushes every WQE at
// once, whatever the link does: a drain that sees no WQE retire for a while means the device
// executes nothing. The completion watchdog cannot tell: it watches QPs on the default path,
// and this one is in a round (so is every QP whose peer's notification came first); and the
// engine that would run the watchdog's fallbacks waits with the drain. Without this the
// drain waited for DrainTimeout while the peer, waiting for our reply, gave up at its
// HandshakeTimeout and failed the QP (found by internal/sim: a default NIC hung while the
// peer's traffic towards it timed out first). The device is then taken for dead as the
// watchdog takes it: the drain stops waiting, the round reposts what has no completion (the
// peer's receive counter says what it received), every other QP falls back too, and nothing
// probes the device again.

// drainWatch is a drain's view of its progress.
type drainWatch struct {
	left  int       // WQEs without completion when last counted
	since time.Time // since when that count has not moved
}

// drainHangBound is how long a drain may see nothing retire before it takes the device for
// hung: the watchdog's bound, at most half the peer's HandshakeTimeout so that the peer still
// waits for our reply; 0 (never) with the watchdog off.
func (c *Context) drainHangBound() time.Duration {
	if c.opts.CQWatchdog <= 0 {
		return 0
	}
	return min(c.opts.CQWatchdog, c.opts.HandshakeTimeout/2)
}

// drainStalled counts the drain's progress (left WQEs without completion) and reports whether the
// device is hung; then it marks it dead and queues the fallback of every QP on it.
func (q *QP) drainStalled(w *drainWatch, left int) bool {
	now := q.c.now()
	if w.since.IsZero() || left != w.left {
		w.left, w.since = left, now
		return false
	}
	bound := q.c.drainHangBound()
	if bound <= 0 || now.Sub(w.since) < bound {
		return false
	}
	c := q.c
	if c.defDead.CompareAndSwap(false, true) {
		c.eng.do(func() { c.fallBackAll(&c.watchdogFallbacks) })
	}
	return true
}
