package failover

// A stepped context (Options.Stepped) has no watchdog goroutine: the completion watchdog
// (watchdog.go) is a timer on the context's clock whose callback queues a scan on the
// engine, as the probes of probe_step.go are. The timer runs only while a QP on the default
// NIC has signaled WRs due (Step arms it, each scan arms the next): an idle context leaves no
// timer pending, so a simulation that finds work without a timer finds it stuck. The scan and
// its bound are the goroutine's (watchdogScan, every CQWatchdog/4).

// stepWatchdog arms the watchdog's next scan when none is pending, the watchdog is on, the
// default device is not already taken for dead, and a QP has something to watch.
func (c *Context) stepWatchdog() {
	if c.wdArmed || c.opts.CQWatchdog < 0 || !c.anyWatched() {
		return
	}
	c.wdArmed = true
	c.clk.AfterFunc(wdPeriod(c.opts.CQWatchdog), func() {
		c.eng.do(func() {
			c.wdArmed = false
			c.watchdogScan(c.now())
			c.stepWatchdog()
		})
	})
}

// anyWatched reports whether a QP never fell back and has signaled WRs due on the default
// NIC (what watchLocked watches), or has them due on a backup set it runs on
// (watchBackupLocked).
func (c *Context) anyWatched() bool {
	defDead := c.defDead.Load()
	for _, q := range c.live.all() {
		if !q.mu.TryLock() {
			return true // busy: look at it in the scan
		}
		due := false
		if !defDead && (!q.destroyed && !q.tracked && q.mach.sendState() == SendDefault || q.watchPassLocked()) {
			_, due = q.def.SignaledDue()
		}
		if _, b, ok := q.backupWatchedLocked(); ok && !due {
			_, due = b.SignaledDue()
		}
		q.mu.Unlock()
		if due {
			return true
		}
	}
	return c.anyCtlSending()
}
