package sim

import (
	"errors"
	"math/rand/v2"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Over the failover layer, a share of the seeds post WRs the layer must not retransmit:
// FETCH_AND_ADD, and WRs flagged failover.SendIneligible. The layer takes them on the default
// NIC but refuses a fallback while one of them has no completion (ErrNotSafe): the QP fails,
// its WRs complete with the default QP's error and flushes, as without SHIFT, and the peer's
// QP, whose round the failed side refuses, fails too. What is checked (observe, errAllowed,
// final):
//
//   - an atomic runs at most once: wherever a QP's fallback goes through, every add it posted
//     ran exactly once (the peer's counter equals the adds posted: none was left to the
//     backup); at the end the counter equals the completed adds unless the pair failed, and
//     lies between the completed and the posted adds if it did;
//   - a fallback goes through only if every ineligible WRITE or READ still outstanding for the
//     application had run on the default NIC (its data is in place when the QP leaves
//     Default), so none is left to be retried on the backup;
//   - a refusal (ErrNotSafe) comes only with an ineligible WR or atomic outstanding;
//   - errors (send or receive completions) come only on a pair one of whose QPs was refused
//     that way, and only once its QP is Failed; nothing succeeds after a QP's first error;
//     every signaled WR still completes (with the error) before the run ends.
//
// The draws come from a stream of their own, so that a seed without these WRs runs as it
// did before they existed.

// riskSeeds: one seed in riskSeeds posts them.
const riskSeeds = 4

// drawRisk decides, from the seed's own stream, whether the run posts unsafe WRs.
func (s *runner) drawRisk() {
	if !s.cfg.Failover {
		return
	}
	s.rr = rand.New(rand.NewPCG(s.cfg.Seed, 0x756e73616665)) // "unsafe"
	s.risky = s.rr.IntN(riskSeeds) == 0
}

// drawCAS decides, from a stream of the seed's own, whether the run's atomics compare and swap
// (half the runs, over the provider and over the failover layer) instead of adding: the same
// draws otherwise, so a run that adds is the run it was before CMP_AND_SWP was simulated. A
// swap expects the counter at the sum of the adds posted before it, so one that ran twice
// makes every later one fail.
func (s *runner) drawCAS() {
	s.cas = rand.New(rand.NewPCG(s.cfg.Seed, 0x434d50535750)).IntN(2) == 0 // "CMPSWP"
}

// riskyOp turns the drawn op into what is posted over the failover layer: an atomic stays one
// on half its draws in a risky run (about 5% of the posts), else it is a WRITE; and about 5% of
// a risky run's posts carry SendIneligible. Only on a QP in Default: a WR posted there goes to
// the default NIC, which is what the boundary concerns (one queued in a round goes to the
// backup first and is safe).
func (s *runner) riskyOp(e *end, op verbs.WROpcode) (verbs.WROpcode, bool) {
	ok := s.risky && e.qp.(*failover.QP).SendState() == failover.SendDefault
	if op.Atomic() && (!ok || s.rr.IntN(2) != 0) {
		op = verbs.WRRDMAWrite
	}
	return op, ok && !op.Atomic() && s.rr.IntN(20) == 0
}

// unsafeWR reports whether p is a WR the failover layer must not retransmit.
func unsafeWR(p *sent) bool { return p.inelig || p.op.Atomic() }

// observe follows every QP's send state; it runs after each step. A QP that left Default
// did so through a fallback that went through (every WR of the default QP had completed or was
// reposted) or failed; see the checks above.
func (s *runner) observe() error {
	if !s.cfg.Failover {
		return nil
	}
	for _, e := range s.w.ends {
		q := e.qp.(*failover.QP)
		st := q.SendState()
		was := e.lastSend
		e.lastSend = st
		if was != failover.SendDefault || st == failover.SendDefault {
			continue
		}
		if st == failover.SendFailed {
			if !errors.Is(q.Err(), failover.ErrNotSafe) {
				continue
			}
			if !e.hasUnsafe() {
				return s.violation("host %d pair %d: fallback refused as not safe with no atomic or ineligible WR outstanding: %v", e.host, e.pair, q.Err())
			}
			e.refused, e.peer.refused = true, true
			continue
		}
		// The fallback went through: what the default QP ran is all there is of it.
		if got := e.peer.counter(); got != e.addPosted {
			return s.violation("host %d pair %d: QP left Default (%v) with the peer's counter at %d, the adds posted sum to %d: an atomic left to the backup", e.host, e.pair, st, got, e.addPosted)
		}
		for i := range e.sq {
			p := &e.sq[i]
			if !p.inelig {
				continue
			}
			if !s.ran(e, p) {
				return s.violation("host %d pair %d: QP left Default (%v) with ineligible %v wr_id %d outstanding and not run", e.host, e.pair, st, p.op, p.wrid)
			}
		}
	}
	return nil
}

// ran reports whether p's effect is in place (a SEND's is the receiver's to check).
func (s *runner) ran(e *end, p *sent) bool {
	switch p.op {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		return intact(e.peer.slot(p.target, p.n), uint64(e.host), uint64(e.pair), p.seq)
	case verbs.WRRDMARead:
		return string(e.slot(p.stage, p.n)) == string(e.peer.slot(readSrc, p.n))
	}
	return true
}

func (e *end) hasUnsafe() bool {
	for i := range e.sq {
		if unsafeWR(&e.sq[i]) {
			return true
		}
	}
	return false
}

// errAllowed checks an error completion on e over the failover layer: only on a pair refused
// for an unsafe WR, and only once e's QP is Failed.
func (s *runner) errAllowed(e *end, what string, wrid uint64, status verbs.WCStatus) error {
	if err := s.observe(); err != nil {
		return err
	}
	q := e.qp.(*failover.QP)
	if !e.refused {
		return s.violation("host %d pair %d: %s wr_id %d completed with %v over the failover layer", e.host, e.pair, what, wrid, status)
	}
	if q.SendState() != failover.SendFailed && q.RecvState() != failover.RecvFailed {
		return s.violation("host %d pair %d: %s wr_id %d completed with %v, its QP in %v/%v", e.host, e.pair, what, wrid, status, q.SendState(), q.RecvState())
	}
	return nil
}

// postAccepted checks a post the failover layer took: a Failed QP takes none (the workload
// draws no application error, the one failure whose posts go to the default QP in ERR as
// without SHIFT): a refused QP's posts, and its refused peer's, fail with ErrQPState.
func (s *runner) postAccepted(e *end, op verbs.WROpcode) error {
	if !s.cfg.Failover {
		return nil
	}
	if q := e.qp.(*failover.QP); q.SendState() == failover.SendFailed {
		return s.violation("host %d pair %d: post of %v accepted on a Failed QP: %v", e.host, e.pair, op, q.Err())
	}
	return nil
}
