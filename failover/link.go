package failover

import (
	"fmt"
	"sync/atomic"

	"github.com/shift-rdma/shift/probe"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Link events (paper §4.2: detect a failure before the RC retry timer does). With
// Options.LinkEvents set, a down event of the default NIC's link moves every QP of the
// context whose traffic runs on the default NIC to the backup at once, through the same
// fallback an error completion starts. Without it a failure is found by a polled error
// completion, which an application with only unsignaled WRs outstanding may not poll for a
// long time, and which the RC retry timer delays by its whole timeout × retry count. An up
// event only brings the probes forward (probe_up.go): a link that is up is not yet a path
// that works, and the probe decides.

// watchLinks reads the link events until the channel closes or the context closes.
func (c *Context) watchLinks(events <-chan probe.LinkEvent) {
	defer c.linkWG.Done()
	onGrownStack(func() { c.linkLoop(events) }) // link events run rounds here: stack.go
}

// linkLoop acts on the link events until the context closes or events does.
func (c *Context) linkLoop(events <-chan probe.LinkEvent) {
	for {
		select {
		case <-c.quit:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			c.onLinkEvent(ev)
		}
	}
}

// onLinkEvent acts on one link event of the default NIC: a down event falls back every QP
// with traffic on it, an up event brings the next probe of every QP on the backup forward
// (on the engine; the reader runs it when the engine is idle, a stepped context queues it
// for its Step).
func (c *Context) onLinkEvent(ev probe.LinkEvent) {
	c.linkEvents.Add(1)
	if !ev.Up {
		c.lastDown.Store(c.now().UnixNano())
		c.eng.doNow(func() { c.fallBackAll(&c.linkFallbacks) })
		return
	}
	c.eng.doNow(c.probeAllUp)
}

// fallBackAll starts the fallback of every QP with a part on the default NIC (a link event,
// a port or device failure), counting each in n. A QP the application has not yet moved to
// RTR is left alone: nothing of it can be in flight, it has no peer to follow it, and moving
// it to ERR failed the application's own connect (ib_write_bw: "Failed to modify QP to RTR"
// when the link went down during its set-up). Once connected it falls back on its first
// error completion, as it would without a link watcher.
//
// The QPs' post gates are closed first, all of them under one barrier (closeGatesBatch):
// each round closing its own paid one membarrier, 15–30 µs on the 2-core VM while the other
// CPU runs the process, one QP after the other (BenchmarkNetnsLinkDownQPs). A QP whose round
// did not take it off the fast path after all (it failed meanwhile, say) gets the gates it
// had open back.
func (c *Context) fallBackAll(n *atomic.Uint64) {
	qs := c.live.all()
	closed := closeGatesBatch(qs, (*QP).onDefaultLocked)
	for i, q := range qs {
		q.mu.Lock()
		if q.onDefaultLocked() {
			n.Add(1)
			q.fallbackLocked(ctlMsg{}, false)
		} else if !q.destroyed && q.passingThroughLocked() {
			q.flushDeadLocked() // failed before the device died (deadflush.go)
		}
		if !q.slow && !q.destroyed {
			closed[i].reopen(q)
		}
		q.mu.Unlock()
	}
}

// onDefaultLocked reports whether q is connected and has a part on the default NIC: what a
// fallback of every QP moves (q.mu held).
func (q *QP) onDefaultLocked() bool {
	if q.destroyed || q.rtrAttr.State != verbs.QPStateRTR {
		return false
	}
	st, rs := q.mach.sendState(), q.mach.recvState()
	return st == SendDefault || st == SendWaitDrained || rs == RecvDefault
}

// watchDefaultLink starts a link watcher on the netdev of device name's port opts.Port.
func watchDefaultLink(name string, opts Options) (probe.Watcher, error) {
	devs, err := provider.Devices()
	if err != nil {
		return nil, fmt.Errorf("failover: watch the link of %s: %w", name, err)
	}
	netdev := ""
	for _, d := range devs {
		if d.Name != name {
			continue
		}
		if d.Emulated && !opts.WatchLink {
			// Its netdev names a stand-in (or nothing) on this host: its link events come
			// from the emulated fabric (Options.LinkEvents).
			return nil, &noWatchError{"emulated device, its link events come from the fabric"}
		}
		if p, ok := d.Port(int(opts.Port)); ok {
			netdev = p.Netdev
		}
	}
	if netdev == "" {
		return nil, &noWatchError{fmt.Sprintf("port %d has no netdev", opts.Port)}
	}
	w, err := probe.New(probe.Options{Netdevs: []string{netdev}, NetNS: opts.LinkNetNS})
	if err != nil {
		return nil, fmt.Errorf("failover: watch the link of %s (%s): %w", name, netdev, err)
	}
	return w, nil
}

// noWatchError says why a default device's link cannot be watched; it wraps ErrNoLinkWatch.
type noWatchError struct{ why string }

func (e *noWatchError) Error() string { return e.why + ": " + ErrNoLinkWatch.Error() }
func (e *noWatchError) Unwrap() error { return ErrNoLinkWatch }
