package failover

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/shift-rdma/shift/provider"
)

// Step runs a stepped context's background work once (Options.Stepped): the default
// device's async events (async_step.go), the link events of Options.LinkEvents
// (link_step.go) and the watchdog's timer (watchdog_step.go); the engine's queued
// transitions; then, for each backup device in chain order, its async events (bkdead.go),
// its shadow verbs when a scan is woken or due, and the completions waiting on its CQs
// (polled: a stepped context reads no completion channel); then what that queued on the
// engine. It reports whether it did anything. Only the simulation's one goroutine may call
// it, never from inside Yield.
//
// The async descriptors are read once per instant of the clock (a read is a system call,
// and Step runs several times per instant): an event raised at an instant already read is
// read at the next one. In the simulation every event is raised by a timer, so its instant
// is always a new one.
func (c *Context) Step() bool {
	if !c.opts.Stepped {
		return false
	}
	events := false
	if now := c.now(); !now.Equal(c.stepEventsAt) {
		c.stepEventsAt, events = now, true
	}
	ran := events && c.async.step()
	if c.stepLinks() {
		ran = true
	}
	c.stepWatchdog()
	if c.eng.runQueued() {
		ran = true
	}
	for _, b := range c.bks {
		if events && b.stepEvents() {
			ran = true
		}
		if b.stepScan() {
			ran = true
		}
		if b.stepPoll() {
			ran = true
		}
	}
	if c.eng.runQueued() {
		ran = true
	}
	return ran
}

// stepScan runs one shadow scan when one is wanted (a verb recorded, a wake) or due (a
// blocked verb's back-off, an MR listing or a re-arm that asked for another look), and
// reports whether it ran one. The timing follows shadowLoop's, on the context's clock.
func (b *backupDev) stepScan() bool {
	woken := false
	select {
	case <-b.wake:
		woken = true
	default:
	}
	now := b.c.now()
	if !woken && (b.stepDue.IsZero() || now.Before(b.stepDue)) {
		return false
	}
	refresh, blocked, progressed, empty := b.scan(b.stepCtx)
	if progressed || b.stepBackoff == 0 {
		b.stepBackoff = 100 * time.Microsecond
	}
	switch {
	case !empty && blocked:
		b.stepDue = now.Add(b.stepBackoff)
		b.stepBackoff = min(2*b.stepBackoff, 20*time.Millisecond)
	case !empty:
		b.stepDue = now // verbs became runnable: the next step scans again
	case refresh > 0:
		b.stepDue = now.Add(refresh)
	default:
		b.stepDue = time.Time{}
	}
	return true
}

// stepPoll hands every CQ of the device that holds a completion to its handler, in CQ
// number order (the event goroutine's work, without the event), and reports whether any
// did.
func (b *backupDev) stepPoll() bool {
	type ready struct {
		n   uint32
		pcq *provider.CQ
	}
	var rs []ready
	b.cqMu.Lock()
	for pcq := range b.cqs {
		if !pcq.Empty() {
			rs = append(rs, ready{pcq.Rings().CQN, pcq})
		}
	}
	for pcq := range b.ctlCQs {
		if !pcq.Empty() {
			rs = append(rs, ready{pcq.Rings().CQN, pcq})
		}
	}
	b.cqMu.Unlock()
	slices.SortFunc(rs, func(x, y ready) int { return cmp.Compare(x.n, y.n) })
	for _, r := range rs {
		b.cqMu.Lock()
		cq := b.cqs[r.pcq]
		ep := b.ctlCQs[r.pcq]
		b.cqMu.Unlock()
		switch {
		case ep != nil:
			ep.onEvent()
		case cq != nil:
			cq.onBackupEvent(b.idx)
		}
	}
	return len(rs) > 0
}

// Shadowed reports whether every backup device ran every shadow verb recorded so far (what
// WaitShadow waits for, without waiting: a stepped context's verbs run only in Step), with
// the errors of those that failed.
func (c *Context) Shadowed() (bool, error) {
	var errs []error
	done := true
	for _, b := range c.bks {
		b.mu.Lock()
		if len(b.ops) > 0 || b.running {
			done = false
		}
		errs = append(errs, b.errs...)
		b.mu.Unlock()
	}
	return done, errors.Join(errs...)
}
