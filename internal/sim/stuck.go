package sim

import (
	"fmt"
	"strings"

	"github.com/shift-rdma/shift/failover"
)

// stuckNow is the liveness check of an idle world: nothing can run (every NIC, the fabric and
// both contexts found no work), no timer is armed and no packet is due, so nothing will ever
// happen again but what the application does; yet a signaled WR waits for its completion or a
// SEND the peer posted waits to be received. Completions already queued are the
// application's to poll, so both CQs are polled first (the failover layer's poll may start
// work too), and the world is asked again. Outstanding work then is stuck for good: a QP
// without a pending timer, reported at once rather than when the step budget runs out.
func (s *runner) stuckNow() error {
	for h := range s.w.hosts {
		// A poll takes up to len(s.wcs); the CQ holds at most every QP's two queues.
		for range 1 + 2*len(s.w.ends)*(sqDepth+s.w.rq)/len(s.wcs) {
			n := s.res.WCs
			if err := s.poll(h); err != nil {
				return err
			}
			if s.res.WCs == n {
				break
			}
		}
	}
	if !s.idle(true) {
		return nil
	}
	if _, ok := s.nextEvent(); ok {
		return nil
	}
	var b strings.Builder
	for _, e := range s.w.ends {
		if w := e.waiting(); w != "" {
			fmt.Fprintf(&b, "[host %d pair %d QP %#x%s: %s] ", e.host, e.pair, e.qp.QPN(), s.states(e), w)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	v := s.violation("%v: nothing can run and no timer or packet is pending, yet %s", ErrStuck, b.String())
	v.Err = ErrStuck
	return v
}

// waiting says what e still expects, or "" if nothing: its signaled WRs without a completion,
// and the peer's SENDs not received. A failed QP expects nothing more than its flushes, which
// are in the CQ by now.
func (e *end) waiting() string {
	if e.failed || e.refused {
		return ""
	}
	var w []string
	for i := range e.sq {
		if e.sq[i].signaled {
			w = append(w, fmt.Sprintf("signaled %v wr_id %d (%d sends outstanding)", e.sq[i].op, e.sq[i].wrid, len(e.sq)))
			break
		}
	}
	// A peer whose WRs left are all unsignaled gives SHIFT's completion watchdog nothing to
	// watch until the drain posts a signaled WRITE behind them (its NIC may have hung with
	// them: seed 59261): not stuck before that.
	tail := len(e.peer.sq) > 0 && unsignaledOnly(e.peer.sq)
	if !e.peer.failed && e.expect < e.peer.twoSided && !tail {
		w = append(w, fmt.Sprintf("receive of the peer's two-sided %d of %d (%d receives posted)", e.expect, e.peer.twoSided, e.recvPosted-e.recvDone))
	}
	return strings.Join(w, ", ")
}

// states is e's QP's send and receive states over the failover layer.
func (s *runner) states(e *end) string {
	if q, ok := e.qp.(*failover.QP); ok {
		return fmt.Sprintf(" %v/%v", q.SendState(), q.RecvState())
	}
	return ""
}
