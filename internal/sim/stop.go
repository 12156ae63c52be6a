package sim

import (
	"math/rand/v2"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Application stops. An application may move its own QP to ERR at any time (librdmacm's
// rdma_disconnect does, as do applications that flush a QP before destroying it). Over the
// failover layer that ends SHIFT's involvement with the QP (failover/appstop.go), whatever the
// QP is doing at that moment (a round under way, a handshake, on a backup, probing): what it
// had outstanding completes (flushed, unless it had completed), later posts fail, Query says
// ERR, and its peer fails as it would without SHIFT, its own fallback refused. In a quarter of
// the failover runs (a stream of the seed's own, so the others run as before) the application
// stops one QP once a number of posts drawn from the stream went out; from then on the pair's
// errors are allowed (end.refused), and the run must still end with nothing stuck or lost. In
// half of those runs the application then destroys the QP, as a teardown does, once every WR
// it had posted on it completed (flushed); the QP's CQ must show nothing of it afterwards,
// whatever SHIFT's engine, probes and watchdog still had in hand for it.

// stopStream names the stream ("STOP").
const stopStream = 0x53544f50

// stopState is a stopping run's plan.
type stopState struct {
	r       *rand.Rand // nil: the run stops nothing
	at      int        // the number of posts after which the application stops a QP
	destroy bool       // then destroys it
	victim  *end       // the QP stopped, once it was
}

// drawStop plans a run's stop.
func drawStop(seed uint64, fo bool, ops int) stopState {
	r := rand.New(rand.NewPCG(seed, stopStream))
	if !fo || r.IntN(4) != 0 {
		return stopState{}
	}
	return stopState{r: r, at: r.IntN(ops), destroy: r.IntN(2) == 0}
}

// stopStep stops a QP once the plan's posts went out, as the application would.
func (s *runner) stopStep(posts int) error {
	if s.stop.victim != nil {
		return s.destroyStep()
	}
	if s.stop.r == nil || posts < s.stop.at {
		return nil
	}
	e := s.w.ends[s.stop.r.IntN(len(s.w.ends))]
	if s.paused(e.host) {
		return nil // the next step draws again
	}
	s.stop.victim = e
	e.refused, e.peer.refused = true, true
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		return s.violation("modify_qp to ERR on host %d pair %d: %v", e.host, e.pair, err)
	}
	s.res.Stops++
	s.record(evStop, uint64(e.host)<<8|uint64(e.pair), 0, 0, 0)
	q := e.qp.(*failover.QP)
	if st, rs := q.SendState(), q.RecvState(); st != failover.SendFailed || rs != failover.RecvFailed {
		return s.violation("host %d pair %d: the application stopped its QP, SHIFT left it in %v/%v", e.host, e.pair, st, rs)
	}
	if a, err := q.Query(verbs.QPAttrState); err != nil || a.State != verbs.QPStateErr {
		return s.violation("host %d pair %d: query_qp of the QP the application stopped: %v, %v", e.host, e.pair, a.State, err)
	}
	return nil
}

// destroyStep destroys the stopped QP once its WRs all completed, in the runs that do.
func (s *runner) destroyStep() error {
	e := s.stop.victim
	if !s.stop.destroy || e.gone || len(e.sq) > 0 || e.recvPosted != e.recvDone+e.recvFailed || s.paused(e.host) {
		return nil
	}
	if err := e.qp.Destroy(); err != nil {
		return s.violation("destroy_qp on host %d pair %d: %v", e.host, e.pair, err)
	}
	e.gone = true
	s.res.Destroys++
	s.record(evStop, uint64(e.host)<<8|uint64(e.pair), 1, 0, 0)
	return nil
}

// unsignaledOnly reports whether every send left is unsignaled. Such a tail of the QP the
// application stopped may never complete: a WR the NIC executed before the stop has no
// completion to give (it was unsignaled), and the stopped QP refuses the signaled WRITE that
// the drain posts behind an unsignaled tail. One the NIC had not executed is flushed, and its
// flush is still checked (sendDone). Seed 47255 (recovery, two backups) waited for ever for
// such a SEND.
func unsignaledOnly(sq []sent) bool {
	for i := range sq {
		if sq[i].signaled {
			return false
		}
	}
	return true
}
