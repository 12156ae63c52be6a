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
		case st == SendFailed:
			q.flushDeadSetLocked(q.cs()) // failed on the set before its device was found dead
		case onSet:
			q.failBackupLocked(bkFail{q: q, set: int(q.cur.Load()), wc: verbs.WC{Status: verbs.WCFatalErr}})
		case st == SendDefault:
			q.skipDeadSetLocked()
		}
		q.mu.Unlock()
	}
	// The device's control messages in flight or waiting will neither arrive nor fail: the
	// QPs that sent them moved on above, and what a failed or destroyed QP sent (a refusal)
	// is answered again on another device (found by internal/sim: failover seed 1554 with two
	// backups, a refusal on a backup NIC that died).
	for _, ep := range b.endpoints() {
		ep.mu.Lock()
		lost := ep.takeLostLocked()
		ep.mu.Unlock()
		b.resendRefusals(ep, lost)
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

// flushDeadSetLocked completes with WR_FLUSH_ERR what a QP that failed on backup set bs (no
// next backup: failLocked) still waits for there, bs's device being dead or taken for hung:
// such a device writes no flush, and the application waited for ever (found by internal/sim:
// a QP the application stopped on a backup that had hung, seed 7474 of the stop runs). The
// WRs are those a chain to a next backup would have reposted: the sends of the backup log in
// posting order, then the receives posted and not completed (the receive log's tail) when
// they are on the set (as many application receives as its kinds record). Once per set;
// q.mu held.
func (q *QP) flushDeadSetLocked(bs *bkSet) {
	if !bs.dev.dead.Load() {
		return
	}
	q.fifoMu.Lock()
	if !bs.gaveUp || bs.deadFlushed {
		q.fifoMu.Unlock()
		return
	}
	bs.deadFlushed = true
	onSet := 0 // the application's receives posted on the set and not completed
	for _, k := range bs.recvKinds {
		if k == kindApp {
			onSet++
		}
	}
	sends := make([]verbs.WC, 0, len(q.bkLog))
	for i := range q.bkLog {
		sends = append(sends, verbs.WC{WRID: q.bkLog[i].wr.WRID, Status: verbs.WCWRFlushErr, QPNum: q.qpn})
	}
	q.freeRecs(q.bkLog)
	clear(q.bkLog)
	q.bkLog = q.bkLog[:0]
	q.fifoMu.Unlock()
	q.scq.mu.Lock()
	q.scq.buf = append(q.scq.buf, sends...)
	q.scq.mu.Unlock()
	q.rcq.mu.Lock()
	var recvs []verbs.WC
	if p := q.rPosted.Load(); p-q.recvDone == uint64(onSet) {
		// The receive log's tail is on the set (not on the default QP, whose own flushes
		// report it, nor partly: then nothing is flushed here).
		for i := q.recvDone; i < p; i++ {
			recvs = append(recvs, verbs.WC{WRID: q.rlog[i&q.rmask].WRID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: q.qpn})
		}
		q.recvDone = p
	}
	q.rcq.buf = append(q.rcq.buf, recvs...)
	q.rcq.mu.Unlock()
	q.scq.raise()
	q.rcq.raise()
}
