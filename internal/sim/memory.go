package sim

import (
	"maps"
	"slices"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Bounded memory over the failover layer: every memEvery steps and at the end of a run, no
// queue or log of a failover QP or CQ (failover.QP.QueueSizes, CQ.QueueSizes) has a capacity
// beyond a bound derived from the QP's capacity. The application never has more than sqDepth
// sends and rqDepth receives outstanding, and SHIFT adds a few WRs of its own (fences,
// fillers, stand-ins, a control message or two); a queue that tracks outstanding work holds
// at most their sum, and Go's append may double a slice's capacity past what it held. A
// queue that is not trimmed as its work completes grows with the run instead (thousands of
// WRs over a run of 300 posts per end and more with recovery), far past the bound.
const memEvery = 1024

// qpQueueBound bounds a QP's queues: twice (append's doubling) the application's sends and
// receives plus as many again for SHIFT's own WRs.
func (s *runner) qpQueueBound() int { return 2 * 2 * (sqDepth + s.w.rq) }

// cqQueueBound bounds a host CQ's queues: four times the CQ's capacity (every QP's two
// queues; the buffer is made with room to spare, and append may double it).
func (s *runner) cqQueueBound() int { return 4 * len(s.w.ends) * (sqDepth + s.w.rq) }

// memCheck checks the bounds, and keeps the largest size seen in the result.
func (s *runner) memCheck() error {
	if !s.cfg.Failover {
		return nil
	}
	for _, e := range s.w.ends {
		sizes := e.qp.(*failover.QP).QueueSizes()
		for _, name := range slices.Sorted(maps.Keys(sizes)) { // the same report every run
			n := sizes[name]
			s.res.MaxQueue = max(s.res.MaxQueue, n)
			if b := s.qpQueueBound(); n > b {
				return s.violation("host %d pair %d: the failover QP's %s grew to %d entries, past the bound %d of a QP with %d sends and %d receives", e.host, e.pair, name, n, b, sqDepth, s.w.rq)
			}
		}
	}
	for h, x := range s.w.hosts {
		for _, cq := range []verbs.CQ{x.cq, x.scq} {
			if cq == nil {
				continue
			}
			sizes := cq.(*failover.CQ).QueueSizes()
			for _, name := range slices.Sorted(maps.Keys(sizes)) {
				n := sizes[name]
				s.res.MaxCQQueue = max(s.res.MaxCQQueue, n)
				if b := s.cqQueueBound(); n > b {
					return s.violation("host %d: the failover CQ's %s grew to %d entries, past the bound %d", h, name, n, b)
				}
			}
		}
	}
	return nil
}
