package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// SwitchToBackup moves a healthy QP's traffic to the backup NIC on demand (active switching,
// paper §4.4: a straggling default path). It runs the fallback a failure would, so the peer
// follows, and the QP stays on the backup (no probing) until SwitchToDefault. It returns once
// the switch started; SendState and RecvState tell when it completed.
func (q *QP) SwitchToBackup() error {
	q.mu.Lock()
	if st, rs := q.mach.sendState(), q.mach.recvState(); st != SendDefault || rs != RecvDefault {
		q.mu.Unlock()
		return fmt.Errorf("failover: switch QP %#x to the backup: %w: states %v/%v", q.qpn, verbs.ErrQPState, st, rs)
	}
	q.pinned = true
	q.mu.Unlock()
	q.fallback(ctlMsg{}, false)
	if q.mach.sendState() == SendFailed {
		return fmt.Errorf("failover: switch QP %#x to the backup: %w", q.qpn, q.Err())
	}
	return nil
}

// SwitchToDefault ends SwitchToBackup: probing starts at once and the fence brings the
// traffic back to the default NIC (WaitSignaled → WaitDrained → Default) as after a failure.
func (q *QP) SwitchToDefault() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pinned = false
	if q.mach.sendState() == SendFallback {
		q.startProbeLocked()
	}
}
