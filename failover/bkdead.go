package failover

import "github.com/shift-rdma/shift/provider/verbs"

// A backup device that dies (docs/FAILOVER.md "Dead NICs"). A dead NIC writes no CQE and
// sends nothing, so the side whose backup died learns of it from nothing on that device:
// its WRs there never complete, and a chain that leaves the set waited DrainTimeout for the
// flushes of its QPs (drainSetLocked) while the peer, which chained first on its retry
// timer's error, gave up at its HandshakeTimeout (found by internal/sim: with two backups,
// the first backup of one host killed after the fallback failed the QPs). The device's own
// async descriptor says it: IBV_EVENT_DEVICE_FATAL. Then the device is marked dead, every QP
// using one of its sets chains to the next backup as on an error completion of the set
// (failBackupLocked: with no next backup it fails), and drains of its sets poll what it
// wrote without waiting for the rest. Its sets are not re-armed: its port stays down.
// A QP still on its default path whose next fallback would use the dead device's set is
// pointed at the next backup instead (no round: nothing of it runs on the set); the peer's
// fallback, whose notification is lost with the dead device, chains there when its control
// endpoint's retries fail, and this side follows its notification.

// onAsyncEvent acts on one event of the backup device: PORT_ACTIVE of the port in use asks
// for a re-arm pass (rearm.go), DEVICE_FATAL chains every QP off the device.
func (b *backupDev) onAsyncEvent(ev verbs.AsyncEvent) {
	switch ev.Type {
	case verbs.EventPortActive:
		if ev.Port == int(b.c.opts.Port) {
			b.kickRearm()
		}
	case verbs.EventDeviceFatal:
		if b.dead.CompareAndSwap(false, true) {
			c := b.c
			c.eng.do(func() { c.chainOffDead(b) })
		}
	}
}

// chainOffDead moves every QP that uses one of b's sets (its traffic fell back there) to the
// next backup. Engine.
func (c *Context) chainOffDead(b *backupDev) {
	for _, q := range c.live.all() {
		q.mu.Lock()
		st, rs := q.mach.sendState(), q.mach.recvState()
		onSet := (st != SendDefault && st != SendFailed) || rs == RecvFallback
		switch {
		case q.destroyed || q.cs().dev != b:
		case onSet:
			q.failBackupLocked(bkFail{q: q, set: int(q.cur.Load()), wc: verbs.WC{Status: verbs.WCFatalErr}})
		case st == SendDefault:
			q.skipDeadSetLocked()
		}
		q.mu.Unlock()
	}
}

// stepEvents reads the backup device's async events in a stepped context (Step: its
// descriptor is non-blocking; readPortEvents is the goroutine's loop) and reports whether
// there was one.
func (b *backupDev) stepEvents() bool {
	got, _ := readEvents(b.ctx.AsyncFD(), b.handleEvent)
	return got
}

// handleEvent acts on one event record of the backup device's descriptor.
func (b *backupDev) handleEvent(ev [16]byte) { b.onAsyncEvent(b.ctx.DecodeAsyncEvent(ev)) }

// skipDeadSetLocked points q's next fallback at the next backup set, q's set in use being on
// a dead device and q still on its default path; with none left the set stays (that
// fallback then fails). q.mu held.
func (q *QP) skipDeadSetLocked() {
	j := q.nextSetLocked()
	if j < 0 {
		return
	}
	q.leaveSetLocked(j, false)
}
