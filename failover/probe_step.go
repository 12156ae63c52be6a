package failover

import "time"

// A stepped context (Options.Stepped) has no probe goroutines: each probe step is a timer on
// the context's clock whose callback queues the step on the engine, and the wait for a
// probe's completion is a timer every probePoll. The steps and their timing are probeLoop's
// (probeBegin, probeEnd, probeNext); only who waits differs.

// probePoll is how often a waiting probe looks for its completion (probeWait's pace).
const probePoll = 500 * time.Microsecond

// probeAfter runs the next probe step after d (iv: the wait between failed probes).
// A step brought forward by an up event (nudgeProbe) supersedes the one pending.
func (q *QP) probeAfter(d, iv time.Duration) {
	q.up.seq++
	seq := q.up.seq
	q.up.due, q.up.timed = q.c.now().Add(d), true
	q.c.clk.AfterFunc(d, func() {
		q.c.eng.do(func() {
			if seq != q.up.seq {
				return
			}
			q.up.timed = false
			q.probeTick(iv)
		})
	})
}

// probeTick is one probe step on the engine.
func (q *QP) probeTick(iv time.Duration) {
	res, gen, posted := q.probeBegin()
	if !posted {
		q.probeThen(res, iv)
		return
	}
	q.probeAwait(gen, iv, q.c.now().Add(probeWaitGuard))
}

// probeAwait looks for the result of the probe of incarnation gen every probePoll, then ends
// the step (probeEnd) as probeWait and probeStep do.
func (q *QP) probeAwait(gen uint64, iv time.Duration, deadline time.Time) {
	q.c.clk.AfterFunc(probePoll, func() {
		q.c.eng.do(func() {
			q.scq.pollAside()
			r := q.probeRes.Load()
			if r == 0 && q.defGen.Load() == gen && q.c.now().Before(deadline) {
				q.probeAwait(gen, iv, deadline)
				return
			}
			q.probeThen(q.probeEnd(r, gen), iv)
		})
	})
}

// probeThen schedules the step after one that gave res.
func (q *QP) probeThen(res int, iv time.Duration) {
	next, done := probeNext(&q.c.opts, res, &iv)
	if done {
		q.up.nudged = false
		return
	}
	if q.up.nudged { // an up event came during the step, as probeLoop's select would see it
		q.up.nudged = false
		next = q.nudgedNext(q.c.now(), next, &iv)
	}
	q.probeAfter(next, iv)
}
