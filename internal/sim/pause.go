package sim

import (
	"math/rand/v2"
	"time"
)

// The peer process pausing (issue 14): one host's application and failover context are not
// stepped for a while (a process descheduled, stopped by a debugger, swapped out, in a long
// GC), while its NICs and the fabric go on as hardware does: its NIC ACKs, answers READs and
// lands WRITEs; SENDs that find no receive get RNR NAKs (rnr_retry 7: retried for ever).
// Nothing polls, posts or runs its transitions, so a peer's fallback notification waits for
// the pause to end.
//
// The pause is drawn in a modest share of failover runs: a host, a length of 1 to 80 ms, a
// default link down past the RC reach in the first 10 ms after the shadows are built, and
// the pause's start 100 to 160 ms after it, around the fallback that down starts. Such a
// pause is shorter than HandshakeTimeout (2 s here: a peer waiting for our reply in a fallback round gives up
// after it) and than the completion watchdog's bound (at least 268 ms here: a peer whose
// SEND waits in RNR for our receives must not take its own NIC for hung). Invariant: the
// pause costs nothing (no error completion, nothing lost, duplicated or reordered).
//
// In a quarter of the runs that draw a pause (a stream of the seed's own, so that the others
// run as before) it lasts longer than HandshakeTimeout instead: 2.1 to 3 s. A peer in a
// fallback round towards the paused host gives up on its reply and fails its QP, as
// documented (docs/FAILOVER.md): the application gets the QP's errors, as without SHIFT,
// and the paused host, when it resumes, finds the peer failed (its round refused, or its
// backup path gone) and fails its QPs too. From the pause's start every pair's errors are
// allowed (end.refused); the invariant is the stopped QP's: errors only on a Failed QP,
// nothing duplicated or reordered, nothing succeeds after an error, and every WR completes.

// yieldJump bounds a jump of the clock inside yield, while SHIFT waits for a NIC. The waiting
// thread polls (every 50 µs in production, failover/pace.go) and checks deadlines of its own
// that are no timers of the clock: a drain takes a device that retires nothing for its bound
// for hung (failover/drainhang.go). A jump to the next timer, seconds ahead when the world is
// idle (a peer's HandshakeTimeout), skipped that bound and let the peer give up first: a
// process waiting in a poll loop is not a paused one.
const yieldJump = time.Millisecond

// maxPause bounds a pause: under the watchdog's effective bound and HandshakeTimeout, and
// short enough that RC itself survives it. A peer whose SENDs meet the paused host's empty RQ
// cycles through RNR NAKs (rnr_retry 7: for ever), but each time the resend after an RNR delay
// is lost (1-5 % loss, ACK-loss bursts) it hears nothing and spends one transport retry on a
// 16.8 ms ACK timeout: the RNR NAKs are no progress and do not give them back (as rdma_rxe).
// Eight such timeouts (retry_cnt 7, the 134 ms reach) fail the QP, with or without SHIFT:
// seed 3504 drew a 141 ms pause and lost the peer's backup QP so (with late CQEs, which moved
// its timing). A pause of at most 80 ms leaves room for at most six timeouts.
const maxPause = 80 * time.Millisecond

// longPauseStream names the stream ("LPAUSE") that makes a drawn pause a long one.
const longPauseStream = 0x4c5041555345

// longPauseMin and longPauseSpan bound a long pause: past the sim's HandshakeTimeout (2 s)
// by 100 ms to 1 s.
const longPauseMin, longPauseSpan = 2100 * time.Millisecond, 900 * time.Millisecond

// pauseFault draws the run's pause.
func (s *runner) pauseFault() {
	if s.fx.r.IntN(100) >= s.faultShare() {
		return
	}
	h := s.fx.r.IntN(2)
	down := s.faultAt()
	s.fallbackAt(down)
	// The fallback starts when the RC reach (134 ms) runs out after the link went down: the
	// pause begins around then, before or after.
	at := down + time.Duration(100_000+s.fx.r.IntN(60_000))*time.Microsecond
	d := time.Duration(1+s.fx.r.IntN(int(maxPause/time.Millisecond))) * time.Millisecond
	long := false
	if lr := rand.New(rand.NewPCG(s.cfg.Seed, longPauseStream)); lr.IntN(4) == 0 {
		long = true
		d = longPauseMin + time.Duration(lr.Int64N(int64(longPauseSpan/time.Millisecond)))*time.Millisecond
	}
	s.after(at, func() {
		s.res.Faults.Pauses++
		if long {
			s.res.Faults.LongPauses++
			for _, e := range s.w.ends {
				e.refused = true // the peer's HandshakeTimeout may fail any pair
			}
		}
		s.fx.paused[h] = true
		s.fault(fxPause, uint64(h), uint64(d), 0)
		s.w.clk.AfterFunc(d, func() {
			s.fx.paused[h] = false
			s.fault(fxResume, uint64(h), 0, 0)
			s.pauseEnded()
		})
	})
}

// pauseEnded gives the run, once a paused host resumes, at least half the step budget to
// finish its work; until then the budget does not run out (pausedNow), within four budgets. A long pause is counted in virtual time, the budget in steps: a run whose
// other host kept the world busy (probing for a NIC that had died, late CQEs held and
// released) spent its 500,000 steps in 2.23 s of virtual time, inside a 2.1–3 s pause, and
// ended "stuck" with the paused host's completions waiting in its CQs, never polled
// (seed 169959, recovery with two backups; it passes at 608,015 steps). The liveness that
// matters stays checked: once the process runs again, everything completes within the
// budget's second half, as after the recovery runs' storm.
func (s *runner) pauseEnded() {
	s.limit = max(s.limit, s.step+s.cfg.MaxSteps/2)
}

// pausedNow reports whether a host's process is paused.
func (s *runner) pausedNow() bool { return s.fx.paused[0] || s.fx.paused[1] }

// paused reports whether host h's process is paused: neither its application nor its
// context runs.
func (s *runner) paused(h int) bool { return s.fx.paused[h] }

// endFaults ends the faults that would touch the teardown (the store is back for Close).
func (s *runner) endFaults() {
	if s.w.kv != nil {
		s.w.kv.mode = kvUp
	}
}
