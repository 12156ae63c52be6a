package failover

import (
	"slices"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// The completion watchdog (docs/FAILOVER.md "Dead NICs"). A NIC that hangs silently raises
// no event, keeps its link up and never completes anything: no error completion, link event
// or async event starts a fallback, and an application waiting for its completions waits for
// ever. The watchdog looks every CQWatchdog/4 at each QP on the default NIC (and on the backup
// in use: watchdog_backup.go) that has signaled WRs outstanding: while its send CQ has a CQE the poller has not taken (the device made
// progress, the application is slow to poll) or its completions advance, all is well; a QP
// that stays with signaled WRs outstanding, nothing completed and nothing waiting for a whole
// CQWatchdog while the port is up means the device stopped. SHIFT then takes the default
// device for failed, as on DEVICE_FATAL: every QP on it falls back, without waiting for its
// completions, and nothing probes it again.
//
// The bound a QP gets is at least twice its retry timer's reach (retryReach), so the watchdog
// never takes a peer or a path that stopped answering, which the NIC reports itself, for a
// hung NIC. An idle QP (nothing signaled outstanding) is never suspect, whatever the time; nor is one
// whose WRs are all unsignaled (no completion is due). The bound must exceed the longest time
// a QP of the application legitimately waits for a completion: a peer that answers RNR for
// ever (rnr_retry 7) stalls a SEND that long.

// DefaultCQWatchdog is the watchdog bound when Options.CQWatchdog is 0: well above the RC
// retry timer's usual reach (timeout 14, retry_cnt 7: about 0.5 s), so a failure the NIC
// reports itself is always reported first.
const DefaultCQWatchdog = 10 * time.Second

// wdState is what the watchdog remembers of one QP (watchdog goroutine only).
type wdState struct {
	done  uint32    // WRs the QP had retired when last seen (provider SignaledDue)
	since time.Time // since when nothing changed; zero: not watching (idle)
	set   *bkSet    // the backup set watched (wdBk only)
}

// wdPeriod is how often the watchdog scans for bound.
func wdPeriod(bound time.Duration) time.Duration { return max(bound/4, time.Millisecond) }

func (c *Context) startWatchdog() {
	if c.opts.CQWatchdog < 0 {
		return
	}
	c.wdDone = make(chan struct{})
	go func() {
		defer close(c.wdDone)
		t := time.NewTicker(wdPeriod(c.opts.CQWatchdog))
		defer t.Stop()
		for {
			select {
			case <-c.quit:
				return
			case now := <-t.C:
				c.watchdogScan(now)
			}
		}
	}()
}

// watchdogScan looks at every QP at time now and falls back when one has been silent for the
// bound; it reports whether it did. Only the watchdog goroutine (or a test, with none running)
// calls it.
func (c *Context) watchdogScan(now time.Time) bool {
	defDead := c.defDead.Load()
	stalled := false
	var hung []*backupDev
	for _, q := range c.live.all() {
		if !q.mu.TryLock() {
			continue // a fallback or a control verb holds it: not a QP left in silence
		}
		if !defDead && q.watchLocked(now, c.opts.CQWatchdog) {
			stalled = true
		}
		if b := q.watchBackupLocked(now, c.opts.CQWatchdog); b != nil && !slices.Contains(hung, b) {
			hung = append(hung, b)
		}
		q.mu.Unlock()
	}
	for _, b := range c.ctlHung(now, c.opts.CQWatchdog) { // watchdog_ctl.go
		if !slices.Contains(hung, b) {
			hung = append(hung, b)
		}
	}
	for _, b := range hung {
		c.backupHung(b) // watchdog_backup.go
	}
	if !stalled {
		return false
	}
	a, err := c.def.QueryPort(c.opts.Port)
	if err != nil || a.State != verbs.PortActive {
		return false // a port that is down is the port events' (or the retry timer's) to handle
	}
	c.defDead.Store(true)
	c.eng.do(func() { c.fallBackAll(&c.watchdogFallbacks) })
	return true
}

// watchLocked updates q's watchdog state and reports whether q has been silent for bound.
// q.mu is held, so q is not destroyed under it (its CQs outlive it).
func (q *QP) watchLocked(now time.Time, bound time.Duration) bool {
	w := &q.wd
	if q.watchPassLocked() {
		return q.silentLocked(now, bound)
	}
	if q.destroyed || q.tracked || q.mach.sendState() != SendDefault {
		// After a fallback the default QP's WRs are SHIFT's to account (by position): the
		// watchdog covers QPs that never left it.
		*w = wdState{}
		return false
	}
	q.fifoMu.Lock()
	queued := q.failQueued
	q.fifoMu.Unlock()
	if queued {
		// An error completion of the default QP was polled and its fallback is queued on the
		// engine: the NIC reported the failure, the QP is not silent. (A scan between the
		// poll and the fallback took it for hung once the application had not polled for
		// the bound, a process paused past it: found by internal/sim.)
		*w = wdState{}
		return false
	}
	return q.silentLocked(now, bound)
}

// silentLocked is the watchdog's rule on the default QP: signaled WRs due, nothing completed
// and nothing waiting in its CQ for bound (at least twice the retry reach). q.mu held.
func (q *QP) silentLocked(now time.Time, bound time.Duration) bool {
	w := &q.wd
	done, due := q.def.SignaledDue()
	if !due {
		*w = wdState{} // idle: nothing is due
		return false
	}
	if w.since.IsZero() || done != w.done || q.scq.def.CompletionWaiting() {
		w.done, w.since = done, now
		return false
	}
	return now.Sub(w.since) >= max(bound, 2*retryReach(q.attr))
}

// watchPassLocked reports whether the watchdog watches q as a failed QP whose application
// waits for the default QP's completions (pass-through): a default QP in ERR flushes its WRs
// at once on a live device, so one that stays silent for the bound is on a hung device, whose
// flushes never come (deadflush.go). q.mu held.
func (q *QP) watchPassLocked() bool {
	return !q.destroyed && !q.deadFlushed && q.mach.sendState() == SendFailed && q.passingThroughLocked()
}

// retryReach is how long the QP's own retry timer may take to report a path or a peer that
// stopped answering (RETRY_EXC_ERR): timeout × (retry_cnt + 1). Until twice that passed, a
// silent QP may be one whose healthy NIC is still retrying, and that failure is the NIC's to
// report (it classifies it; a watchdog firing would take a working NIC for dead).
func retryReach(a verbs.ConnectAttr) time.Duration {
	d := a.Defaults()
	per := 4096 * time.Nanosecond << min(d.Timeout, 31)
	return per * time.Duration(int(d.RetryCnt&7)+1)
}
