package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// errSwitchClosing answers a switch asked of a closing context.
var errSwitchClosing = fmt.Errorf("failover: the context is closing: %w", verbs.ErrQPState)

// SwitchToBackup moves a healthy QP's traffic to the backup NIC on demand (active switching,
// paper §4.4: a straggling default path). It runs the fallback a failure would, so the peer
// follows, and the QP stays on the backup (no probing) until SwitchToDefault. It returns once
// the switch started; SendState and RecvState tell when it completed. The switch is the
// engine's, as every transition (engine.go): the caller waits for it there.
func (q *QP) SwitchToBackup() error {
	var err error
	if !q.c.eng.wait(func() { err = q.switchToBackup() }) {
		return fmt.Errorf("failover: switch QP %#x to the backup: %w", q.qpn, errSwitchClosing)
	}
	return err
}

func (q *QP) switchToBackup() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if st, rs := q.mach.sendState(), q.mach.recvState(); st != SendDefault || rs != RecvDefault || q.destroyed {
		return fmt.Errorf("failover: switch QP %#x to the backup: %w: states %v/%v", q.qpn, verbs.ErrQPState, st, rs)
	}
	_ = q.mach.pinEvent(EvSwitchBackup) // defined in every pin state
	q.fallbackLocked(ctlMsg{}, false)
	if q.mach.sendState() == SendFailed {
		return fmt.Errorf("failover: switch QP %#x to the backup: %w", q.qpn, q.failErr)
	}
	return nil
}

// SwitchToDefault ends SwitchToBackup: probing starts at once and the fence brings the
// traffic back to the default NIC (WaitSignaled → WaitDrained → Default) as after a failure.
// It runs on the engine; the caller waits for it.
func (q *QP) SwitchToDefault() {
	q.c.eng.wait(func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		_ = q.mach.pinEvent(EvSwitchDefault)
		if q.mach.sendState() == SendFallback {
			q.startProbeLocked()
		}
	})
}
