package sim

import (
	"math/rand/v2"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
)

// Late receive CQEs: an RC responder acknowledges a message once it placed it and writes the
// CQE on its own schedule, and the CQEs of two NICs reach host memory in no order relative to
// each other. The stepped emulator writes a CQE in the step that acknowledges, so without
// this fault a peer's recovery notification on the default NIC always came after the
// completions of what the peer sent before it on the backup. It did not on real veths under
// load (TestNetnsRoCEv2Flapping/send lost a SEND: failover/recvcount.go).
//
// In a quarter of the failover runs (the fault stream's draw), each step may, with nothing
// held, hold back the receive CQEs of the backup QP of one QP whose receive side is on the
// backup (nic.Device.HoldRecvCQEs) for 20 µs to 2 ms of virtual time; the release writes them
// in order. Its own stream of the seed draws when, which and how long, so a run without the
// fault draws exactly as before it existed. Invariant: the delay costs nothing.

// lateState is the run's late-CQE fault.
type lateState struct {
	r    *rand.Rand  // nil: the run draws no late CQEs
	held *nic.Device // the NIC holding CQEs back, nil when none
}

// lateEvery is the chance per step (one in lateEvery) that a hold starts.
const lateEvery = 40

// lateFault draws whether the run delays CQEs.
func (s *runner) lateFault() {
	if s.fx.r.IntN(4) != 0 {
		return
	}
	s.late.r = rand.New(rand.NewPCG(s.cfg.Seed, 0x4c415445)) // "LATE"
}

// lateStep may start a hold (faultStep).
func (s *runner) lateStep() {
	l := &s.late
	if l.r == nil || l.held != nil || l.r.IntN(lateEvery) != 0 {
		return
	}
	var on []*end
	for _, e := range s.w.ends {
		if q, ok := e.qp.(*failover.QP); ok && q.RecvState() == failover.RecvFallback && q.Backup() != nil {
			on = append(on, e)
		}
	}
	if len(on) == 0 {
		return
	}
	e := on[l.r.IntN(len(on))]
	q := e.qp.(*failover.QP)
	dev := e.h.nics[1+q.BackupIndex()]
	d := time.Duration(20+l.r.IntN(1980)) * time.Microsecond
	qpn := q.Backup().QPN()
	dev.HoldRecvCQEs(qpn)
	l.held = dev
	s.res.Faults.LateCQEs++
	s.fault(fxLateCQEs, uint64(e.host), uint64(qpn), uint64(d))
	s.w.clk.AfterFunc(d, func() {
		dev.ReleaseRecvCQEs()
		l.held = nil
		s.fault(fxLateRelease, uint64(e.host), uint64(qpn), 0)
	})
}
