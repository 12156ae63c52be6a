package failover

import (
	"fmt"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// bkSet is one QP's backup QP set on one backup device: the backup data QP, connected to the
// peer's set of the same index, and the device's control endpoint towards the peer's context
// (ctlep.go, shared by every QP between the two contexts), on which SHIFT's notifications
// travel while this set is in use.
type bkSet struct {
	dev   *backupDev
	qp    atomic.Pointer[provider.QP]
	ep    atomic.Pointer[ctlEndpoint] // set with peerQPN before ready
	ready atomic.Bool                 // connected to the peer's set
	psn   uint32
	// peerQPN is the peer's default QPN (the QP entry this set connected to): the messages
	// we send name it, and those we act on come from it.
	peerQPN atomic.Uint32

	// staleMarked counts the application RECVs ever left stale on the set's QP by a receive
	// recovery, fillers the zero-length SENDs we ever posted on it to consume the peer's
	// (stale.go; q.mu).
	staleMarked, fillers uint32
	// The kinds of the set's posted receives and signaled sends, in posting order (q.fifoMu).
	recvKinds []uint8
	sendKinds []uint8
	// heldOps are the opcodes of the kindHeld WQEs in sendKinds, in order (fifoMu).
	heldOps []verbs.WCOpcode
	// failQueued: an error completion of this set was queued for failBackup; stash keeps its
	// error completions of application WRs until failBackup decides whether the application
	// sees them (the QP fails) or not (the WRs move to the next backup) (q.fifoMu).
	failQueued bool
	stash      []ownedWC
	// gaveUp: the QP failed with this set; later error completions go to the application
	// (q.fifoMu). deadFlushed: SHIFT completed what the application still waited for on the
	// set, its device dead (flushDeadSetLocked; q.fifoMu).
	gaveUp, deadFlushed bool
	// dead: the set failed and the QP moved to another one; its completions are drained and
	// never used again, until a re-arm (rearm.go) gives the set fresh QPs (q.fifoMu).
	dead bool
	// gen: the set's generation, 0 at the first connect, one more per re-arm (rearm.go);
	// its KV entry's key names it.
	gen atomic.Uint32
}

// cs is the backup set in use (or the one the next fallback uses).
func (q *QP) cs() *bkSet { return q.sets[q.cur.Load()] }

// ctlDown reports whether the set's control endpoint failed.
func (bs *bkSet) ctlDown() bool {
	ep := bs.ep.Load()
	return ep != nil && ep.failed.Load()
}

// nextSetLocked returns the index of the first backup set, in chain order, other than the
// one in use, that is connected and has not failed (or was re-armed since), or -1.
func (q *QP) nextSetLocked() int {
	cur := int(q.cur.Load())
	for i, bs := range q.sets {
		if i == cur {
			continue
		}
		q.fifoMu.Lock()
		dead := bs.dead
		q.fifoMu.Unlock()
		if !dead && bs.ready.Load() && bs.qp.Load() != nil && !bs.ctlDown() {
			return i
		}
	}
	return -1
}

// chainLocked moves q from the backup set in use, which failed (or which the peer left: its
// notification came on set j), to set j, in a fallback round on j's control endpoint
// (roundLocked with chain): the old set is stopped and drained (what completed there is the
// application's; what did not is reposted on j from the logs), the receives move, and
// both sides exchange their receive counters and reset their default QPs once, as in any
// round. A round already under way on the old set starts again on j: the incarnation its
// messages carry (ctlMsg.gen) keeps both sides' default QP incarnations equal whether or
// not the old set delivered its notification or reply.
func (q *QP) chainLocked(j int, peer ctlMsg, fromPeer bool) {
	old := q.cs()
	q.leaveSetLocked(j, true)
	// The control endpoint is shared with the other QPs towards the peer: it stays.
	if p := old.qp.Load(); p != nil {
		_ = p.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState)
	}
	if q.fn != nil {
		// The fence is bound to the old backup QP: a recovery starts over from the new one.
		_ = q.fn.Abort(fmt.Errorf("failover: QP %#x: backup %d failed", q.qpn, old.dev.idx))
		q.scq.mu.Lock()
		q.fn = nil
		q.scq.mu.Unlock()
	}
	if !q.drainSetLocked(old) {
		return // the QP went while the drain waited
	}
	old.dev.kickRearm() // rebuilt once its link is up (rearm.go)
	q.c.chains.Add(1)
	q.stats.chains.Add(1)
	// What ran on the old set and did not complete is reposted on the new one (bkLog). Our
	// round under way on the old set, if any, starts again on the new one; when the peer's
	// notification came on it, we answer it instead, as its receiver.
	_ = q.mach.event(wordRepost, EvChainSends)
	_ = q.mach.roundEvent(EvRoundOver) // defined in every round state
	q.roundLocked(peer, fromPeer, true)
}

// drainSetLocked polls the backup CQs until the stopped set's QPs have no WQE left without a
// completion (bounded by DrainTimeout): what completed successfully is the application's and
// counts; the flushes are dropped (the set is dead), their WRs reposted. It waits with q.mu
// released and reports false if the QP went meanwhile (pauseLocked).
func (q *QP) drainSetLocked(bs *bkSet) bool {
	deadline := q.c.now().Add(q.c.opts.DrainTimeout)
	pace := q.c.pacer()
	var dw drainWatch
	var outS []provider.SendWQE
	var outR []provider.RecvWQE
	for {
		for _, cq := range []*CQ{q.scq, q.rcq} {
			cq.mu.Lock()
			_ = cq.pollBackupDevLocked(bs.dev.idx)
			cq.mu.Unlock()
		}
		n := 0
		if p := bs.qp.Load(); p != nil {
			outS = p.OutstandingSends(outS[:0])
			outR = p.OutstandingRecvs(outR[:0])
			for _, w := range outS {
				if w.Rung {
					n++
				}
			}
			n += len(outR)
		}
		if n == 0 || bs.dev.dead.Load() || q.c.now().After(deadline) || q.drainSetStalled(&dw, n, bs) {
			return true // a dead device completes nothing more (bkdead.go, drainhang.go)
		}
		if !q.pauseLocked(&pace) {
			return false
		}
	}
}

// leaveSetLocked marks the set in use dead and makes set j the one in use, under both CQ
// mutexes and fifoMu, which the pollers hold while they route a backup completion by set
// (dropStash: the old set's stashed completions go with it). q.mu held.
func (q *QP) leaveSetLocked(j int, dropStash bool) {
	old := q.cs()
	q.scq.mu.Lock()
	if q.rcq != q.scq {
		q.rcq.mu.Lock()
	}
	q.fifoMu.Lock()
	old.dead = true
	if dropStash {
		old.stash = nil
	}
	q.cur.Store(int32(j))
	q.fifoMu.Unlock()
	if q.rcq != q.scq {
		q.rcq.mu.Unlock()
	}
	q.scq.mu.Unlock()
}
