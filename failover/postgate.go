package failover

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/internal/asymfence"
)

// postGate is a QP's send or receive gate (gate.go's states, without gateBusy). Its poster,
// one at a time per QP as for the provider, marks itself inside with busy and then loads
// state; a fallback stores gateClosed, makes every thread execute a barrier (asymfence),
// and waits for busy to clear. With the kernel's membarrier the poster's mark is a plain
// store: no locked instruction on the post, which on amd64 would wait for the WQE and
// doorbell stores ahead of it to leave the store buffer. Without it (an old kernel, a seccomp
// filter, race builds) both marks are sequentially consistent atomics, the Dekker pattern.
type postGate struct {
	state atomic.Uint32 // gateOpen, gateClosed or gateBackup (backupgate.go); changed under q.mu only
	busy  uint32        // 1 while the poster is inside; written by the poster only
}

// asymGates is set once, before the first QP exists (openContext, initGates), when the
// process registered for the expedited membarrier; posters read it without synchronisation
// after that (the QP's creation is ordered after the context's).
var (
	asymGates bool
	gatesOnce sync.Once
)

// initGates picks the gates' barrier for the process: the asymmetric one where the kernel
// gives it, except in race builds, whose detector sees only the atomics.
func initGates() {
	gatesOnce.Do(func() { asymGates = !raceBuild && asymfence.Register() == nil })
}

// enter marks the poster inside and reports whether the gate was open; on false the poster
// is outside again and takes the slow path.
func (g *postGate) enter() bool { return g.enterIn(gateOpen) }

// enterIn is enter for the gate in state want (gateOpen, or gateBackup: backupgate.go).
func (g *postGate) enterIn(want uint32) bool {
	if asymGates {
		g.busy = 1 // ordered before the load below by the closer's Fence
	} else {
		atomic.StoreUint32(&g.busy, 1)
	}
	if g.state.Load() == want {
		return true
	}
	g.leave()
	return false
}

// leave ends the poster's call: every ring and field write of the call is visible to a
// closer that reads busy == 0.
func (g *postGate) leave() {
	if asymGates && plainRelease {
		g.busy = 0 // a plain store releases on amd64 (TSO), and the compiler keeps store order
	} else {
		atomic.StoreUint32(&g.busy, 0)
	}
}

// closeAndLeave closes the gate from inside (the poster found the QP failed) and leaves.
func (g *postGate) closeAndLeave() {
	g.state.Store(gateClosed)
	g.leave()
}

// closePostGates closes gs and waits until no poster is inside any of them. The barrier is
// paid only when one of them was open: a poster that entered after an earlier close saw it.
func closePostGates(gs ...*postGate) {
	wasOpen := false
	for _, g := range gs {
		if g.state.Swap(gateClosed) != gateClosed {
			wasOpen = true // open for Default posts, or for backup posts (backupgate.go)
		}
	}
	if wasOpen && asymGates {
		asymfence.Fence()
	}
	for _, g := range gs {
		for atomic.LoadUint32(&g.busy) != 0 {
			runtime.Gosched()
		}
	}
}

// closedGates says which of a QP's post gates closeGatesBatch closed (they were open).
type closedGates struct{ send, recv bool }

// reopen opens again the gates closeGatesBatch closed, for a QP that stayed on the fast
// path (q.mu held).
func (cg closedGates) reopen(q *QP) {
	if cg.send && q.gateMayOpen(&q.sendGate) {
		q.openSendLocked()
	}
	if cg.recv && q.gateMayOpen(&q.recvGate) {
		q.recvGate.reopen()
	}
}

// closeGatesBatch closes the open post gates of every QP of qs for which sel holds (under
// its q.mu), then makes one barrier for all of them: a round's closePostGates then finds
// them closed and only waits for a poster still inside. It returns, per QP, the gates it
// closed. Gates in backup mode are closed by q.mu's Lock itself.
func closeGatesBatch(qs []*QP, sel func(*QP) bool) []closedGates {
	out := make([]closedGates, len(qs))
	barrier := false
	for i, q := range qs {
		q.mu.Lock()
		if sel(q) {
			out[i].send = q.sendGate.state.CompareAndSwap(gateOpen, gateClosed)
			out[i].recv = q.recvGate.state.CompareAndSwap(gateOpen, gateClosed)
			barrier = barrier || out[i].send || out[i].recv
		}
		q.mu.Unlock()
	}
	if barrier && asymGates {
		asymfence.Fence() // the closes above, before any round reads a gate's busy word
	}
	return out
}

// reopen opens a closed gate (no poster can be inside a closed gate).
func (g *postGate) reopen() bool { return g.state.CompareAndSwap(gateClosed, gateOpen) }
