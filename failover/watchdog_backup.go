package failover

import (
	"time"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The completion watchdog on the backup in use. A backup NIC can hang silently too, after
// the traffic moved there: its QPs' WRs never complete, nothing raises an event, and unless
// the peer sends (its retry timer then reports the path, and its chain reaches us), the
// application waits for ever. The watchdog's scan therefore also looks at each QP whose send
// side runs on a backup set (Fallback, or WaitSignaled with the fence WR there) by the same
// rule as on the default NIC: signaled WRs outstanding on the backup QP, nothing completed,
// no CQE waiting on the backup CQ, for the bound (at least twice the retry reach), the
// backup's port up. The device is then taken for dead as on its DEVICE_FATAL (bkdead.go):
// every QP on one of its sets chains to the next backup, or fails with none left.

// watchBackupLocked updates q's watch of the backup QP in use and returns its device when q
// has been silent there for bound; nil otherwise (q.mu held).
func (q *QP) watchBackupLocked(now time.Time, bound time.Duration) *backupDev {
	w := &q.wdBk
	bs, b, ok := q.backupWatchedLocked()
	if !ok {
		*w = wdState{}
		return nil
	}
	done, due := b.SignaledDue()
	if !due {
		*w = wdState{}
		return nil
	}
	cq := q.scq.bk[bs.dev.idx].Load()
	if w.since.IsZero() || done != w.done || w.set != bs || (cq != nil && cq.CompletionWaiting()) {
		*w = wdState{done: done, since: now, set: bs}
		return nil
	}
	if now.Sub(w.since) < max(bound, 2*retryReach(q.attr)) {
		return nil
	}
	return bs.dev
}

// backupWatchedLocked returns q's backup set in use and its QP when the watchdog watches
// them: the send side runs there and no failure of the set is known or queued; or q failed
// on the set (refused, or stopped by the application) and waits for its flushes there
// (q.mu held).
//
// The second case: a QP that fails on a set moves the backup QP to ERR (giveUpSetLocked),
// whose WRs a live device flushes at once; on a hung device they never complete, and with
// nothing else of SHIFT's on that device (no set in use, no control message in flight) no
// one found it hung: the application that stopped its QP there waited for ever for the
// flushes (TestAppStopOnHungBackup, found while reading for internal/sim's failover seed
// 95126). Taken for dead, the device's sets given up complete what is left (chainOffDead,
// flushDeadSetLocked).
func (q *QP) backupWatchedLocked() (*bkSet, *provider.QP, bool) {
	if q.destroyed {
		return nil, nil, false
	}
	st := q.mach.sendState()
	bs := q.cs()
	b := bs.qp.Load()
	if b == nil || bs.dev.dead.Load() {
		return nil, nil, false
	}
	q.fifoMu.Lock()
	gone := bs.dead || bs.gaveUp || bs.failQueued
	flushing := st == SendFailed && bs.gaveUp && !bs.dead && !bs.deadFlushed
	q.fifoMu.Unlock()
	switch {
	case flushing:
		return bs, b, true
	case q.appErr || gone || (st != SendFallback && st != SendWaitSignaled):
		return nil, nil, false
	}
	return bs, b, true
}

// backupHung takes b for dead once the watchdog found a QP silent on it with its port up
// (a port that is down is its events' and the retry timer's to handle).
func (c *Context) backupHung(b *backupDev) {
	a, err := b.ctx.QueryPort(c.opts.Port)
	if err != nil || a.State != verbs.PortActive {
		return
	}
	c.takeBackupDead(b)
}

// takeBackupDead marks b dead, found hung (by the watchdog or a drain), and queues the chain
// of every QP on one of its sets.
func (c *Context) takeBackupDead(b *backupDev) {
	if b.dead.CompareAndSwap(false, true) {
		c.watchdogBackups.Add(1)
		c.eng.do(func() { c.chainOffDead(b) })
	}
}
