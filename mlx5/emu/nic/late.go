package nic

import (
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

// Late responder CQEs. An RC responder acknowledges a message once it has placed it; the CQE
// that tells the host is written on its own schedule, and the CQEs of two NICs reach host
// memory in no order relative to each other. The emulator writes a CQE right after the ACK
// is queued, so the window is microseconds; HoldRecvCQEs widens it at will, for one QP, so that a test
// can show what happens when a peer's acknowledged message is completed after something that
// came later on another NIC (failover's recovery notification).

// lateCQEs keeps the successful responder CQEs of one QP held back, in order.
type lateCQEs struct {
	// qpn is the QP whose CQEs are held (0: none), read without mu by every receive
	// completion; set under mu.
	qpn  atomic.Uint32
	mu   sync.Mutex
	held []lateCQE
}

type lateCQE struct {
	q   *QP
	e   cqe
	sol bool
}

// hold keeps e back while q's CQEs are held, and reports whether it did; the caller is inside
// q's gate.
func (l *lateCQEs) hold(q *QP, e *cqe, sol bool) bool {
	if l.qpn.Load() != q.qpn {
		return false // no lock on the completion path unless this QP's CQEs are held
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.qpn.Load() != q.qpn { // released meanwhile: written now, after the released ones
		return false
	}
	l.held = append(l.held, lateCQE{q, *e, sol})
	return true
}

// HoldRecvCQEs holds back the CQEs of the messages QP qpn receives successfully until
// ReleaseRecvCQEs: the messages are placed and acknowledged as usual. Error and flush CQEs
// are not held. One QP of the device at a time.
func (d *Device) HoldRecvCQEs(qpn uint32) {
	d.late.mu.Lock()
	d.late.qpn.Store(qpn)
	d.late.mu.Unlock()
}

// ReleaseRecvCQEs writes the held CQEs, in order, and stops holding. A CQE of a QP destroyed
// meanwhile, or reset and not yet back in RTR, is dropped, as the device drops a late
// completion of such a QP.
func (d *Device) ReleaseRecvCQEs() {
	l := &d.late
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.held {
		h := &l.held[i]
		if !h.q.gate.enter() {
			continue
		}
		if !stale(h.q.tr.State(), rc.StateRTR) {
			h.q.rcq.push(&h.e, h.sol)
		}
		h.q.gate.exit()
	}
	l.held = nil
	l.qpn.Store(0)
}
