package failover

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// The completion watchdog on the control endpoints. A backup NIC that hangs while a QP's
// round waits for the peer's answer leaves nothing for the data QPs' watch to see: the
// round's sends are held, none is due on a backup QP, and the notification's SEND on the
// hung NIC's control QP neither completes nor fails. The peer never hears of the round, and
// the QP waited for its HandshakeTimeout (found by internal/sim: failover seed 270 with two
// backups). The scan therefore also looks at each control endpoint with a SEND outstanding,
// by the same rule: nothing completed and no CQE waiting on its CQ for the bound (at least
// twice the control QP's retry reach, so that a peer's silence, which the retry timer
// reports by failing the endpoint, is reported first), the port up. The device is then taken
// for dead as by the other watches: every QP on one of its sets chains to the next backup.

// wdCtl is what the watchdog remembers of one control endpoint (watchdog goroutine, or the
// engine in a stepped context).
type wdCtl struct {
	done  uint64    // SEND completions polled when last seen
	since time.Time // since when nothing changed; zero: not watching
}

// sending reports whether a SEND of the endpoint is posted without completion on an
// endpoint still in use, and how many of its SENDs completed.
func (ep *ctlEndpoint) sending() (done uint64, ok bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.sent.Load() - uint64(len(ep.inflight)), len(ep.inflight) > 0 && !ep.closed && !ep.failed.Load()
}

// silent updates the endpoint's watch and reports whether it has been silent for bound.
func (ep *ctlEndpoint) silent(now time.Time, bound time.Duration) bool {
	w := &ep.wd
	done, ok := ep.sending()
	if !ok {
		*w = wdCtl{}
		return false
	}
	if w.since.IsZero() || done != w.done || ep.cq.CompletionWaiting() {
		*w = wdCtl{done: done, since: now}
		return false
	}
	return now.Sub(w.since) >= max(bound, 2*retryReach(ep.attr))
}

// endpoints returns the device's control endpoints in use, by peer id: a fixed order, so
// that a simulated run replays exactly (chainOffDead sends in it).
func (b *backupDev) endpoints() []*ctlEndpoint {
	b.epMu.Lock()
	eps := slices.Collect(maps.Values(b.eps))
	b.epMu.Unlock()
	slices.SortFunc(eps, func(x, y *ctlEndpoint) int { return cmp.Compare(x.peer, y.peer) })
	return eps
}

// ctlHung returns the backup devices, not yet taken for dead, one of whose control endpoints
// has been silent for bound.
func (c *Context) ctlHung(now time.Time, bound time.Duration) []*backupDev {
	var hung []*backupDev
	for _, b := range c.bks {
		if b.dead.Load() {
			continue
		}
		for _, ep := range b.endpoints() {
			if ep.silent(now, bound) {
				hung = append(hung, b)
				break
			}
		}
	}
	return hung
}

// anyCtlSending reports whether a control endpoint has a SEND outstanding (a stepped
// context's watchdog then keeps its timer).
func (c *Context) anyCtlSending() bool {
	for _, b := range c.bks {
		if b.dead.Load() {
			continue
		}
		for _, ep := range b.endpoints() {
			if _, ok := ep.sending(); ok {
				return true
			}
		}
	}
	return false
}
