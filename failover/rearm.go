package failover

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/fdwait"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Re-arming a backup device (issue 12 §2, docs/FAILOVER.md "N backups"). A backup set that
// failed (dead: the QP chained to another set) and a shared control endpoint that failed
// are rebuilt once the device's link is up again, so that a later failure can use that
// backup again. It runs on the device's shadow goroutine (serviceRearm), the swap of a
// set's QPs on the engine (installSet); never on an application thread, and no lock of the
// data path is held across KV or verbs I/O.
//
// Trigger. A goroutine per backup device reads the device's own async events
// (watchPort); PORT_ACTIVE of the port in use, a chain away from a set of the device
// (chainLocked) and a control endpoint's failure (onEvent) ask the shadow goroutine to
// look (kickRearm). While something is left to rebuild it looks again with a back-off
// (rearmPollMin doubling up to rearmPollMax), reading the port's state itself, so a missed
// event only delays the re-arm.
//
// Handshake. Both sides rebuild, each when its own port is up, and meet through the KV
// store, as at first connect, under keys that carry a generation (suffix /g<n>; none for
// generation 0), so entries of an earlier generation are never read:
//   - a set of QP q on device i: each side whose set is dead creates a fresh backup data QP
//     (INIT), publishes qp/<GID>/<QPN>[/b<i>]/g<n> with n its set's generation + 1, and
//     connects it once the peer's entry of the same generation is there; then the engine,
//     under q's mutexes and without I/O, replaces the dead set's QP (the old one is
//     destroyed after, its entry withdrawn). The entry is published only once the endpoint
//     has nothing in flight, and the swap is queued behind the messages the endpoint
//     already received, so a notification of a round resolved elsewhere is handled while
//     the set is still dead. A set fails on both sides together (a side whose set
//     fails chains and the peer follows on the new set's endpoint), so both sides count the
//     same generations; a side that finds its set dead first waits for the other.
//   - the control endpoint towards peer P on device i: a side whose endpoint failed
//     creates one of generation n+1 and publishes ctl/<own>/<P>/<i>/g<n+1>; a side whose
//     endpoint did not fail replaces it too when it finds the peer's entry of generation
//     n+1 (it looks while it has dead sets towards P, which the failure left on both
//     sides). Each side publishes its endpoint's entry before any set entry that uses it
//     and connects a set only with a connected endpoint that no newer peer entry
//     supersedes, so a re-armed set never pairs an endpoint with a stale one. Once
//     connected the new endpoint replaces the old in every set that used it, and the old
//     one is destroyed.
//
// A set is used again by the next chain (nextSetLocked takes the first live set in chain
// order) or, on the peer, by a notification arriving on it (onControl).
const (
	rearmPollMin = 5 * time.Millisecond
	rearmPollMax = 250 * time.Millisecond
)

// rearmState is a backup device's re-arm work.
type rearmState struct {
	// wanted: something may need rebuilding (kickRearm); the shadow goroutine looks.
	wanted atomic.Bool
	// Shadow goroutine: busy while something is left; due is the next look, poll the
	// back-off after it.
	busy bool
	due  time.Time
	poll time.Duration
	// next holds, per peer context, the control endpoint of the next generation while the
	// peer's entry is missing (b.epMu).
	next map[uint64]*ctlEndpoint
	// sets holds the backup data QPs being built for dead sets (shadow goroutine).
	sets map[*QP]*setBuild
	// Sets and control endpoints re-armed.
	nSets, nEps atomic.Uint64
}

// setBuild is a dead set's replacement being built.
type setBuild struct {
	gen       uint32
	psn       uint32
	qp        *provider.QP
	published bool
}

func (r *rearmState) init() {
	r.next = map[uint64]*ctlEndpoint{}
	r.sets = map[*QP]*setBuild{}
	r.poll = rearmPollMin
}

// genSuffix is the key suffix of generation gen (none for the first).
func genSuffix(gen uint32) string {
	if gen == 0 {
		return ""
	}
	return fmt.Sprintf("/g%d", gen)
}

// qpKeyGen is the key of a QP entry of backup idx and generation gen.
func (c *Context) qpKeyGen(idx int, gid [16]byte, qpn, gen uint32) string {
	return c.qpKeyN(idx, gid, qpn) + genSuffix(gen)
}

// kickRearm asks the device's shadow goroutine to look for something to rebuild.
func (b *backupDev) kickRearm() {
	b.rearm.wanted.Store(true)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// serviceRearm runs a re-arm pass when one is due and returns when to look again (0:
// nothing left). Shadow goroutine.
func (b *backupDev) serviceRearm() time.Duration {
	r := &b.rearm
	if r.wanted.Swap(false) {
		r.busy, r.due, r.poll = true, time.Time{}, rearmPollMin
	}
	if !r.busy {
		return 0
	}
	now := b.c.now()
	if now.Before(r.due) {
		return r.due.Sub(now)
	}
	if r.busy = b.rearmPass(); !r.busy {
		return 0
	}
	d := r.poll
	r.due, r.poll = now.Add(d), min(2*d, rearmPollMax)
	return d
}

// rearmPass rebuilds what it can of the device's dead sets and failed endpoints; it reports
// whether something is left.
func (b *backupDev) rearmPass() bool {
	c, i, r := b.c, b.idx, &b.rearm
	// Per peer context: the QPs whose set i is dead. A failed endpoint that a live QP still
	// names is rebuilt too; one that none names (its peer's QPs went away) is left as it is.
	work := map[uint64][]*QP{}
	for _, q := range c.live.all() {
		ep := q.sets[i].ep.Load()
		switch {
		case ep == nil:
		case q.rearmable(i):
			work[ep.peer] = append(work[ep.peer], q)
		case ep.failed.Load() && work[ep.peer] == nil:
			work[ep.peer] = []*QP{}
		}
	}
	// Builds whose set no longer needs them (the QP was destroyed or failed). Both maps are
	// walked in a fixed order (QPN, peer), so that a simulated run replays exactly.
	built := slices.SortedFunc(maps.Keys(r.sets), func(x, y *QP) int { return cmp.Compare(x.qpn, y.qpn) })
	for _, q := range built {
		if !q.rearmable(i) || c.live.lookup(q.qpn) != q {
			b.dropBuild(q, r.sets[q])
		}
	}
	if len(work) == 0 {
		return false
	}
	if a, err := b.ctx.QueryPort(c.opts.Port); err != nil || a.State != verbs.PortActive {
		return true // the link is still down: PORT_ACTIVE or the next look
	}
	for _, peer := range slices.Sorted(maps.Keys(work)) {
		b.rearmPeer(peer, work[peer])
	}
	return true // the next pass finds what is left, or nothing
}

// rearmable reports whether q's set i is dead and q could use it again.
func (q *QP) rearmable(i int) bool {
	if q.mach.sendState() == SendFailed {
		return false
	}
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	bs := q.sets[i]
	return bs.dead && !bs.gaveUp
}

// setDead reports whether q's set i was left dead (q.fifoMu).
func (q *QP) setDead(i int) bool {
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	return q.sets[i].dead
}

// rearmPeer rebuilds the device's endpoint towards peer when it must be, then the dead
// sets of qs on it.
func (b *backupDev) rearmPeer(peer uint64, qs []*QP) {
	b.epMu.Lock()
	ep := b.eps[peer]
	b.epMu.Unlock()
	if ep == nil || !ep.connected.Load() {
		return
	}
	if ep.failed.Load() || b.peerHasCtlGen(peer, ep.gen+1) {
		if ep = b.rearmEndpoint(ep); ep == nil {
			return // the peer's entry is not there yet
		}
	}
	for _, q := range qs {
		b.rearmSet(q, ep)
	}
}

// peerHasCtlGen reports whether the peer published its control entry of generation gen.
func (b *backupDev) peerHasCtlGen(peer uint64, gen uint32) bool {
	c := b.c
	ctx, cancel := c.kvCtx()
	defer cancel()
	_, err := c.opts.KV.Get(ctx, c.ctlKeyGen(b.idx, peer, c.ctlID, gen))
	return err == nil
}

// rearmEndpoint builds and publishes the endpoint that replaces old (one generation later)
// and, once the peer's entry of that generation is there, connects it, puts it in place of
// old in every set and destroys old. It returns the new endpoint, or nil while it waits.
func (b *backupDev) rearmEndpoint(old *ctlEndpoint) *ctlEndpoint {
	c, peer, gen := b.c, old.peer, old.gen+1
	b.epMu.Lock()
	nx := b.rearm.next[peer]
	if nx == nil || nx.gen != gen {
		var err error
		if nx, err = b.newEndpointLocked(peer, gen); err != nil {
			b.epMu.Unlock()
			return nil
		}
		b.rearm.next[peer] = nx
	}
	b.epMu.Unlock()
	ctx, cancel := c.kvCtx()
	defer cancel()
	if !nx.published.Load() {
		e := ctlEntry{from: c.ctlID, to: peer, ep: verbs.Endpoint{GID: b.gid, QPN: nx.qp.QPN(), PSN: nx.psn}}
		if err := c.opts.KV.Put(ctx, c.ctlKeyGen(b.idx, c.ctlID, peer, gen), e.marshal()); err != nil {
			return nil
		}
		nx.published.Store(true)
	}
	v, err := c.opts.KV.Get(ctx, c.ctlKeyGen(b.idx, peer, c.ctlID, gen))
	if err != nil {
		return nil
	}
	e, err := parseCtlEntry(v, peer, c.ctlID, old.peerGID)
	if err != nil {
		return nil
	}
	if err := nx.connectTo(e, old.attr, old.peerGID); err != nil {
		return nil
	}
	b.epMu.Lock()
	b.eps[peer] = nx
	delete(b.rearm.next, peer)
	b.epMu.Unlock()
	b.rearm.nEps.Add(1)
	for _, q := range c.live.all() {
		q.sets[b.idx].ep.CompareAndSwap(old, nx)
	}
	oldQPN := old.qp.QPN()
	lost, _ := b.closeEndpoint(old)
	b.lostOnReplace(old, lost, oldQPN)
	return nx
}

// lostOnReplace handles the messages lost with the endpoint rearmEndpoint replaced (control
// QP oldQPN): the peer replaced its own, so they were not and will not be delivered, and the
// old QP, destroyed, will not fail them either. The QP of each is told as if its post had
// been flushed (ctlFailed): a round waiting for the peer's answer moves on to its next set, as
// when an endpoint fails, instead of waiting for its HandshakeTimeout (found by internal/sim,
// failover seed 58 with two backups: the peer's endpoint failed and was re-armed while a
// notification of this side was still being retried towards it). Refusals are sent again
// (resendRefusals).
func (b *backupDev) lostOnReplace(old *ctlEndpoint, lost []ctlMsg, oldQPN uint32) {
	var srcs []uint32
	for _, m := range lost {
		if !m.refused {
			srcs = append(srcs, m.src)
		}
	}
	slices.Sort(srcs)
	for _, src := range slices.Compact(srcs) {
		q := b.c.live.lookup(src)
		if q == nil {
			continue
		}
		wc := verbs.WC{Status: verbs.WCWRFlushErr, WRID: ctrlWRID, QPNum: oldQPN}
		b.c.eng.do(func() { q.ctlFailed(b.idx, wc) })
	}
	b.resendRefusals(old, lost)
}

// rearmSet builds q's set on this device again: a fresh backup data QP, published under the
// set's next generation, connected to the peer's of the same generation once it is there,
// then put in place of the dead one (installSet).
func (b *backupDev) rearmSet(q *QP, ep *ctlEndpoint) {
	c, i, r := b.c, b.idx, &b.rearm
	bs := q.sets[i]
	st := r.sets[q]
	if st == nil {
		gen := bs.gen.Load() + 1
		st = &setBuild{gen: gen, psn: (bs.psn + gen*psnStride) & psnMask}
		r.sets[q] = st
	}
	if st.qp == nil {
		p, err := q.makeBackupQP(bs)
		if err != nil {
			return
		}
		st.qp = p
	}
	kctx, cancel := c.kvCtx()
	defer cancel()
	if !st.published {
		if !ep.quiet() {
			// A message the QP sent on the endpoint before its set failed may still be
			// retried: published only once it was delivered (to a dead set, dropped) or
			// failed the endpoint (replaced first), never to land on a re-armed set.
			return
		}
		e := qpEntry{defGID: c.gid, defQPN: q.qpn, backup: verbs.Endpoint{GID: b.gid, QPN: st.qp.QPN(), PSN: st.psn}, ctlID: c.ctlID}
		if err := c.opts.KV.Put(kctx, c.qpKeyGen(i, c.gid, q.qpn, st.gen), e.marshal()); err != nil {
			return
		}
		st.published = true
	}
	q.mu.Lock()
	remote, ba := q.remote, q.attr
	q.mu.Unlock()
	v, err := c.opts.KV.Get(kctx, c.qpKeyGen(i, remote.GID, remote.QPN, st.gen))
	if err != nil {
		return // not yet
	}
	e, err := parseQPEntry(v, remote.GID, remote.QPN)
	if err != nil || e.ctlID != ep.peer {
		return
	}
	ba.Port, ba.GIDIndex = c.opts.Port, b.gidIndex
	if st.qp.State() == verbs.QPStateInit {
		if err := verbs.ToRTR(st.qp, ba, e.backup); err != nil {
			return
		}
	}
	if st.qp.State() == verbs.QPStateRTR {
		if err := verbs.ToRTS(st.qp, ba, st.psn); err != nil {
			return
		}
	}
	// The install runs on the engine, behind the peer's messages that reached the endpoint
	// before it (polled here, if the event goroutine has not yet): those are handled while
	// the set is still dead, so a notification of a round resolved elsewhere cannot start
	// a chain onto the re-armed set.
	ep.onEvent()
	type result struct {
		old *provider.QP
		ok  bool
	}
	// On the engine, and waited for (engine.wait: inline in a stepped context, whose scans
	// run inside Step). A closing context stops the engine before the device's goroutines,
	// so the install ran or never will (the build is dropped with the device, dropBuilds).
	var res result
	if !c.eng.wait(func() {
		old, ok := q.installSet(i, st.qp, ep, remote.QPN, st.gen)
		res = result{old, ok}
	}) {
		return
	}
	if !res.ok {
		return // dropped at the next pass (rearmable is false)
	}
	delete(r.sets, q)
	if res.old != nil {
		_ = res.old.Destroy()
	}
	_ = c.opts.KV.Delete(kctx, c.qpKeyGen(i, c.gid, q.qpn, st.gen-1))
}

// quiet reports whether the endpoint has no message in flight or waiting for a send slot.
func (ep *ctlEndpoint) quiet() bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return len(ep.inflight) == 0 && len(ep.backlog) == 0
}

// installSet puts the connected backup QP p in place of the dead one of set i, with the
// endpoint ep, towards the peer's default QPN peerQPN: the set is live again, of generation
// gen. It returns the replaced QP (to destroy once no lock is held). Engine goroutine; no
// I/O: q.mu, then q.fifoMu, as chainLocked takes them.
func (q *QP) installSet(i int, p *provider.QP, ep *ctlEndpoint, peerQPN, gen uint32) (*provider.QP, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	bs := q.sets[i]
	if q.destroyed || int(q.cur.Load()) == i || !q.setDead(i) {
		return nil, false
	}
	old := bs.qp.Load()
	for _, cq := range []*CQ{q.scq, q.rcq} {
		cq.addQP(&cq.bqps[i], p.QPN(), q)
		if old != nil {
			// The old QP was drained when the QP left it (drainSetLocked): a completion of
			// it still in the CQ names no QP and is skipped.
			cq.addQP(&cq.bqps[i], old.QPN(), nil)
		}
	}
	bs.qp.Store(p)
	bs.ep.Store(ep)
	bs.peerQPN.Store(peerQPN)
	bs.gen.Store(gen)
	bs.dev.rearm.nSets.Add(1)
	q.fifoMu.Lock()
	bs.recvKinds, bs.sendKinds, bs.heldOps, bs.stash = nil, nil, nil, nil
	bs.staleMarked, bs.fillers = 0, 0
	bs.failQueued = false
	bs.dead = false
	q.fifoMu.Unlock()
	return old, true
}

// dropBuild abandons a set's replacement: its QP is destroyed, its entry withdrawn.
func (b *backupDev) dropBuild(q *QP, st *setBuild) {
	delete(b.rearm.sets, q)
	if st.qp != nil {
		_ = st.qp.Destroy()
	}
	if st.published {
		ctx, cancel := b.c.kvCtx()
		_ = b.c.opts.KV.Delete(ctx, b.c.qpKeyGen(b.idx, b.c.gid, q.qpn, st.gen))
		cancel()
	}
}

// dropBuilds abandons every replacement under way (Context.Close, the goroutines stopped).
func (b *backupDev) dropBuilds() {
	for q, st := range b.rearm.sets {
		b.dropBuild(q, st)
	}
}

// watchPort starts the goroutine that reads the backup device's async events: PORT_ACTIVE
// of the port in use asks for a re-arm pass, DEVICE_FATAL chains off the device (bkdead.go).
// Without it (no pipe) the passes read the port's state themselves.
func (b *backupDev) watchPort(ctx context.Context) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return
	}
	var mu sync.Mutex
	closed := false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			_, _ = unix.Write(p[1], []byte{0})
		}
	})
	b.done.Add(1)
	go func() {
		defer b.done.Done()
		defer func() {
			stop()
			mu.Lock()
			closed = true
			unix.Close(p[0])
			unix.Close(p[1])
			mu.Unlock()
		}()
		b.readPortEvents(ctx, p[0])
	}()
}

// readPortEvents reads the device's async descriptor until ctx ends (stopR is readable) or
// the descriptor fails. It waits in the runtime's network poller (internal/fdwait: a wait in
// poll(2) held a processor for up to 10 ms after each event), or in poll(2) where the
// descriptor cannot be watched there.
func (b *backupDev) readPortEvents(ctx context.Context, stopR int) {
	src := b.ctx.AsyncFD()
	if w, err := fdwait.Dup(src, "backup async events"); err == nil {
		defer w.Close()
		for {
			if open, err := readEventsWait(ctx, w, src, b.handleEvent); err != nil || !open {
				return
			}
		}
	}
	for {
		fds := []unix.PollFd{{Fd: int32(stopR), Events: unix.POLLIN}, {Fd: int32(src), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[0].Revents != 0 {
			return
		}
		if fds[1].Revents&unix.POLLIN == 0 {
			if fds[1].Revents != 0 {
				return // the descriptor is gone
			}
			continue
		}
		if _, open := readEvents(src, b.handleEvent); !open {
			return
		}
	}
}
