package failover

import (
	"sync/atomic"
	"time"
)

// Probing on a link's return (issue 12 §4, the switch-back). Probes back off while the
// default path stays down: ProbeInterval doubled after every failed probe up to
// ProbeMaxInterval, so a link that comes back after a few seconds waited up to
// ProbeMaxInterval (2 s by default) for the next probe; in the demo's tools run traffic went
// back to rail 0 about 600 ms after the link did. An up event of the default NIC's link now
// starts the back-off over and brings the next probe step forward, to ProbeInterval after
// the last probe posted. (The peer's recovery notification did too, as a sign that the path
// works; under load it made probes race the peer's rounds and fail more often, and was not
// kept: docs/STATUS.md.) The probe still decides whether the path works: a link that is up
// is not yet a path that works, and a probe that fails costs what it always did (a reset
// round, then the back-off). The ProbeInterval since the last probe bounds the probes a
// flapping link can cause to what the first of a back-off's would be.
//
// A probe posted while the link was down waits for its RC retransmission once the link is
// back: the QP's ACK timeout (67 ms at exponent 14; 4.3 s at NCCL's default of 20), which
// made `BenchmarkNetnsLinkDown`'s link up → both QPs back 80 ms p50 when its link stayed
// down through two `ip` commands (docs/PERFORMANCE.md). The up event gives such a probe up
// instead (at most once a ProbeInterval): a reset round, as the probe's own failure would
// start, and the next probe as soon as the round is over.

// probeUp is what a QP's probe schedule keeps for an up event.
type probeUp struct {
	// nudge wakes the probe goroutine (capacity 1; a stepped context has none).
	nudge chan struct{}
	// lastStart is when the last probe was posted (ns on the context's clock; 0: none yet,
	// or the last one was given up); posted is the incarnation it probes plus one while it
	// waits for its result (0: no probe out).
	lastStart atomic.Int64
	posted    atomic.Uint64
	// lastAbandon is when an up event last gave a probe up (q.mu); afterRound, that the
	// round under way at an up event, or the reset round it started, should bring the next
	// probe forward when the peer's reply ends it (q.mu). A round that ends otherwise (a
	// fallback's handshake, a refusal, a chain) leaves it set for a later reply, whose
	// probe upProbeDelay still holds to ProbeInterval after the last one.
	lastAbandon int64
	afterRound  bool
	// A stepped context's schedule (engine only): seq names the pending timer step
	// (probeAfter), so that a step brought forward supersedes it; due is when that step
	// runs; timed says a timer step is pending, not a probe's wait; nudged, that an up event
	// came during a probe's wait (its step's end looks, as the goroutine's select does).
	seq    uint64
	due    time.Time
	timed  bool
	nudged bool
}

// upProbeDelay is the wait before the next probe step once an up event came: ProbeInterval
// after the last probe posted (at once with none), but never later than the step was due.
func upProbeDelay(now, due time.Time, lastStart int64, o *Options) time.Duration {
	if lastStart == 0 {
		return 0
	}
	return max(min(due.Sub(now), time.Unix(0, lastStart).Add(o.ProbeInterval).Sub(now)), 0)
}

// probeAllUp brings forward the next probe of every QP whose send side is on the backup
// (engine): the default NIC's link came up. A QP in a reset round gets it when the round is
// over: a probe step during the round only waits (probeIdle), a whole ProbeInterval, which
// after the second reset round a fallback's answering side runs was most of
// BenchmarkNetnsLinkDown's link up → sends back (12–13 ms p50 with a 10 ms ProbeInterval).
func (c *Context) probeAllUp() {
	for _, q := range c.live.all() {
		q.mu.Lock()
		on := !q.destroyed && q.mach.probeState() == ProbeRunning && q.mach.sendState() == SendFallback
		if on {
			q.abandonProbeLocked()
			if q.mach.roundState() != RoundIdle {
				q.up.afterRound = true
			}
		}
		q.mu.Unlock()
		if on {
			q.nudgeProbe()
		}
	}
}

// abandonProbeLocked gives up q's probe when it went out after the last down event, into the
// dead link, and waits for its retransmission: a reset round takes the default QPs to the
// next incarnation (the probe's completion is then a flush), and the probe after it runs
// as soon as the round is over (afterRound). At most once a ProbeInterval (q.mu held).
func (q *QP) abandonProbeLocked() {
	if q.up.posted.Load() != q.defGen.Load()+1 || q.mach.roundState() != RoundIdle || q.mach.pinState() != PinNone {
		return
	}
	now := q.c.now().UnixNano()
	if q.up.lastStart.Load() < q.c.lastDown.Load() || now-q.up.lastAbandon < int64(q.c.opts.ProbeInterval) {
		return
	}
	q.up.lastAbandon = now
	q.up.lastStart.Store(0)
	q.up.afterRound = true
	q.c.linkUpProbes.Add(1)
	q.fallbackLocked(ctlMsg{}, false) // a reset round, as the probe's own failure would start
}

// roundOverForProbe brings the next probe forward once the reset round an up event started
// is over and the peer's default QP was reset too: on the peer's reply (reply), which it
// sends as it resets. A crossing notification of the peer's ends the round before the peer
// had ours, and a probe sent then could meet its default QP not yet reset, be dropped, and
// wait for the ACK timeout again: the peer's reply to our notification, which comes next
// and is otherwise dropped, brings the probe forward then (q.mu held; on the engine).
func (q *QP) roundOverForProbe(reply bool) {
	if !q.up.afterRound || !reply {
		return
	}
	q.up.afterRound = false
	if q.mach.probeState() == ProbeRunning && q.mach.sendState() == SendFallback {
		q.nudgeProbe()
	}
}

// nudgeProbe brings q's next probe step forward (upProbeDelay) and starts its back-off over.
// In a stepped context it runs on the engine.
func (q *QP) nudgeProbe() {
	if !q.c.opts.Stepped {
		select {
		case q.up.nudge <- struct{}{}:
		default: // one is pending already
		}
		return
	}
	if !q.up.timed {
		q.up.nudged = true // a probe is in flight: probeThen brings its next step forward
		return
	}
	now := q.c.now()
	if d := upProbeDelay(now, q.up.due, q.up.lastStart.Load(), &q.c.opts); now.Add(d).Before(q.up.due) {
		q.c.linkUpProbes.Add(1)
		q.probeAfter(d, q.c.opts.ProbeInterval)
	}
}

// nudgedNext applies an up event to the probe step due after next: it starts the back-off
// (iv) over and returns the wait to use instead (upProbeDelay), counting a step it brings
// forward.
func (q *QP) nudgedNext(now time.Time, next time.Duration, iv *time.Duration) time.Duration {
	*iv = q.c.opts.ProbeInterval
	d := upProbeDelay(now, now.Add(next), q.up.lastStart.Load(), &q.c.opts)
	if d < next {
		q.c.linkUpProbes.Add(1)
	}
	return d
}
