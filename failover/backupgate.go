package failover

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/internal/asymfence"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The lock-free post on the backup (issue 12 §5). Once a QP's sends (receives) run on a
// backup set (Fallback), an application post used to take q.mu, the mutex every transition
// of the QP holds. Now the post gates have a third state, gateBackup: a post that finds it
// enters as a Default post does (a plain store of busy, a load of the state) and posts on
// the backup QP without q.mu (postBackupLocked: keys mapped, kinds pushed and WRs logged
// under fifoMu, the ring under the CQ's mutex; postRecvFallbackLocked for receives).
//
// What q.mu excluded, the gates exclude: q.mu is a qpMutex, whose Lock and TryLock close
// both backup modes and wait out a poster inside before they return. So every holder of q.mu
// (the engine's transitions, rounds, probes, the watchdog, the locked posts and the fillers)
// runs as before, with no lock-free poster beside it; nothing audits each of them. Only the
// locked posts reopen a mode, under q.mu, after a post of their own on the backup with that
// side in Fallback and no hold; the next holder of q.mu closes it again. The receive slow
// path takes the mutex closing the receive mode only (tryLockRecv): it shares nothing with a
// send poster but the FIFOs under fifoMu and the CQ mutexes (it keeps its own key memo, kmR).

// gateBackup is a post gate's state while its poster may post on the backup without q.mu.
const gateBackup = 3

// qpMutex is q.mu (see above).
type qpMutex struct {
	sync.Mutex
	send, recv *postGate
}

// Lock takes the mutex and closes both gates' backup modes.
func (m *qpMutex) Lock() {
	m.Mutex.Lock()
	m.send.closeBackup()
	m.recv.closeBackup()
}

// TryLock is Lock when the mutex is free.
func (m *qpMutex) TryLock() bool {
	if !m.Mutex.TryLock() {
		return false
	}
	m.send.closeBackup()
	m.recv.closeBackup()
	return true
}

// tryLockRecv takes the mutex for the receive slow path when it is free, closing the
// receive gate's backup mode only.
func (m *qpMutex) tryLockRecv() bool {
	if !m.Mutex.TryLock() {
		return false
	}
	m.recv.closeBackup()
	return true
}

// closeBackup closes the backup mode and waits until its poster left (q.mu held).
func (g *postGate) closeBackup() {
	if g.state.Load() != gateBackup || !g.state.CompareAndSwap(gateBackup, gateClosed) {
		return
	}
	if asymGates {
		asymfence.Fence()
	}
	for atomic.LoadUint32(&g.busy) != 0 {
		runtime.Gosched()
	}
}

// enterBackup is enter for the backup mode.
func (g *postGate) enterBackup() bool { return g.enterIn(gateBackup) }

// openBackupLocked opens gate g's backup mode after a locked post on the backup, when that
// side (onBackup) runs there and nothing holds the QP's posts (q.mu held).
func (q *QP) openBackupLocked(g *postGate, onBackup bool) {
	if q.destroyed || q.appErr || !onBackup || q.mach.holdState() == HoldPosts || !q.gateMayOpen(g) {
		return
	}
	g.state.CompareAndSwap(gateClosed, gateBackup)
}

// postBackupFast posts wrs on the backup inside the backup mode. It reports false, having
// done nothing, when a remote key must be read first (the locked path leaves such WRs to the
// inbox, keywait.go).
func (q *QP) postBackupFast(wrs []verbs.SendWR) (bool, error) {
	dev := q.cs().dev
	for i := range wrs {
		switch wrs[i].Opcode {
		case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRRDMARead,
			verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAdd:
			if !q.km.rkeyKnown(dev, rkeyKey{q.remote.GID, wrs[i].RKey}) {
				return false, nil
			}
		}
	}
	return true, q.postBackupLocked(wrs)
}
