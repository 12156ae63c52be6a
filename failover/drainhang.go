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
// default device is hung; then it marks it dead and queues the fallback of every QP on it.
func (q *QP) drainStalled(w *drainWatch, left int) bool {
	if !w.stalled(q.c, left) {
		return false
	}
	c := q.c
	if c.defDead.CompareAndSwap(false, true) {
		c.eng.do(func() { c.fallBackAll(&c.watchdogFallbacks) })
	}
	return true
}

// The same holds for the drain of a backup set a chain leaves (drainSetLocked): its QPs were
// moved to ERR, and a backup device that hung (the reason for the chain, or found by the peer
// whose chain we follow) flushes nothing. Without a bound the drain waited DrainTimeout while
// the peer gave up at its HandshakeTimeout, and both QPs failed (TestHungBackupWatchdog).
// The device is then taken for dead as its DEVICE_FATAL would (bkdead.go).

// drainSetStalled is drainStalled for a drain of set bs.
func (q *QP) drainSetStalled(w *drainWatch, left int, bs *bkSet) bool {
	if !w.stalled(q.c, left) {
		return false
	}
	q.c.takeBackupDead(bs.dev)
	return true
}

// stalled counts a drain's progress and reports whether nothing retired for the bound.
func (w *drainWatch) stalled(c *Context, left int) bool {
	now := c.now()
	if w.since.IsZero() || left != w.left {
		w.left, w.since = left, now
		return false
	}
	bound := c.drainHangBound()
	return bound > 0 && now.Sub(w.since) >= bound
}
