package failover

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// onFastPath reports whether q is back on the lock-free path: not counted slow, neither of its
// gates closed.
func onFastPath(q *QP) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.slow && q.sendGate.state.Load() != gateClosed && q.recvGate.state.Load() != gateClosed
}

// cqOpen polls cq once (the slow Poll that empties the buffer reopens the gate) and reports
// whether its gate is open again.
func cqOpen(t testing.TB, cq *CQ) bool {
	var w [8]verbs.WC
	if n, err := cq.Poll(w[:]); err != nil || n != 0 {
		t.Fatalf("stray completions or error on an idle CQ: n %d err %v %+v", n, err, w[:n])
	}
	return cq.gate.Load() == gateOpen
}

// sendRoundLocksHeld posts a receive on b, then a signaled SEND on a and polls both CQs to the
// two completions, on another goroutine, while this goroutine holds every mutex the slow
// path would take (both QPs', both CQs', the QPs' FIFO locks). It returns once the round
// completed; if the data path took a lock it never completes and the guard fails the test.
func sendRoundLocksHeld(t *testing.T, e *testEnv, a, b *QP, seq uint64) {
	t.Helper()
	ha, hb := e.hosts[0], e.hosts[1]
	locks := []interface {
		Lock()
		Unlock()
	}{&a.mu, &b.mu, &ha.cq.mu, &hb.cq.mu, &a.fifoMu, &b.fifoMu}
	for _, l := range locks {
		l.Lock()
	}
	done := make(chan error, 1)
	go func() {
		if err := b.PostRecv([]verbs.RecvWR{{WRID: seq, SGL: []verbs.SGE{hb.mr.SGE(4096, 64)}}}); err != nil {
			done <- err
			return
		}
		if err := a.PostSend([]verbs.SendWR{{WRID: seq, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
			done <- err
			return
		}
		for _, cq := range []*CQ{ha.cq, hb.cq} {
			var w [4]verbs.WC
			deadline := time.Now().Add(20 * time.Second)
			for {
				n, err := cq.Poll(w[:])
				if err != nil {
					done <- err
					return
				}
				if n == 1 && w[0].WRID == seq && w[0].Status == verbs.WCSuccess {
					break
				}
				if n != 0 {
					done <- fmt.Errorf("unexpected completions %+v", w[:n])
					return
				}
				if time.Now().After(deadline) {
					done <- errors.New("no completion")
					return
				}
				runtime.Gosched()
			}
		}
		done <- nil
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		err = errors.New("the data path blocked on a mutex held by the test")
	}
	for _, l := range locks {
		l.Unlock()
	}
	if err != nil {
		t.Fatalf("round %d with the slow path's mutexes held: %v", seq, err)
	}
}

// TestFastPathAfterRecovery: after a fallback and the recovery back to Default (by a link
// failure and by SwitchToBackup/SwitchToDefault), both QPs and both CQs are on the lock-free
// data path again, for every cycle: PostRecv, PostSend and Poll complete while the test holds every mutex
// of the slow path, and the data path (PostRecv included) allocates nothing. A stream in between
// checks that no completion was lost or reordered by the reopening.
func TestFastPathAfterRecovery(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	for _, how := range []string{"failure", "switch"} {
		t.Run(how, func(t *testing.T) {
			e := newEnvWith(t, 256, recoverOpts)
			as, bs := e.pairs(t, 1, cp)
			a, b := as[0], bs[0]
			sendRoundLocksHeld(t, e, a, b, 1) // never failed: the fast path from the start
			for cycle := range 2 {
				seed := uint64(100 + 10*cycle)
				switch how {
				case "failure":
					runStream(t, e, a, b, stream{mode: modeSend, msgs: 150, size: 1024, failAt: 50, failHost: 1, seed: seed})
					if !allFallback(a, b) {
						t.Fatalf("cycle %d: not on the backup: %s", cycle, e.describe(a, b))
					}
					if onFastPath(a) || onFastPath(b) {
						t.Fatalf("cycle %d: on the fast path while on the backup", cycle)
					}
					e.linkUp(1)
				case "switch":
					if err := a.SwitchToBackup(); err != nil {
						t.Fatal(err)
					}
					waitFor(t, "both QPs on the backup", func() bool { return allFallback(a, b) }, func() string { return e.describe(a, b) })
					runStream(t, e, a, b, stream{mode: modeSend, msgs: 100, size: 512, failAt: -1, seed: seed})
					if onFastPath(a) || onFastPath(b) {
						t.Fatalf("cycle %d: on the fast path while on the backup", cycle)
					}
					a.SwitchToDefault()
				}
				waitFor(t, "both QPs back to Default", func() bool { return allDefault(a, b) }, func() string { return e.describe(a, b) })
				waitFor(t, "both QPs back on the fast path", func() bool { return onFastPath(a) && onFastPath(b) },
					func() string { return e.describe(a, b) })
				// A stream on the recovered path, then the CQs' gates reopen once SHIFT's
				// buffer is empty.
				runStream(t, e, a, b, stream{mode: modeWrite, msgs: 150, size: 1024, failAt: -1, seed: seed + 1})
				waitFor(t, "both CQs back on the fast path", func() bool { return cqOpen(t, e.hosts[0].cq) && cqOpen(t, e.hosts[1].cq) },
					func() string { return e.describe(a, b) })
				sendRoundLocksHeld(t, e, a, b, uint64(1000+cycle))
				if d, where := recoveredAllocs(t, e, a, b); d != 0 {
					t.Errorf("cycle %d: the recovered data path allocated %d objects in 200 rounds, want 0: %s", cycle, d, where)
				}
				sa, sb := e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats()
				if sa.FastReopens != uint64(cycle+1) || sb.FastReopens != uint64(cycle+1) || sa.Recoveries != uint64(cycle+1) {
					t.Fatalf("cycle %d: counters A %+v B %+v", cycle, sa, sb)
				}
				if !allDefault(a, b) {
					t.Fatalf("cycle %d: left Default: %s", cycle, e.describe(a, b))
				}
			}
		})
	}
}

// recoveredAllocs counts the data path's allocations over 200 SEND/RECV rounds.
func recoveredAllocs(t *testing.T, e *testEnv, a, b *QP) (int64, string) {
	ha, hb := e.hosts[0], e.hosts[1]
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}
	rwr := []verbs.RecvWR{{SGL: []verbs.SGE{hb.mr.SGE(4096, 64)}}}
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	before := dataPathAllocSites()
	for range 200 {
		if err := b.PostRecv(rwr); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		waitN(t, ha.cq, 1)
		waitN(t, hb.cq, 1)
	}
	return allocDelta(before, dataPathAllocSites())
}

// On the backup too the data path allocates nothing once the backup log has reached the
// application's depth (bklog.go: retired records' buffers are reused; keymemo.go): SEND/RECV
// rounds after a fallback, the first 200 to reach that depth, the next 200 counted.
func TestFallbackPathAllocs(t *testing.T) {
	e, a, b := fallenBack(t)
	recoveredAllocs(t, e, a, b)
	if d, where := recoveredAllocs(t, e, a, b); d != 0 {
		t.Errorf("the data path on the backup allocated %d objects in 200 SEND/RECV rounds, want 0: %s", d, where)
	}
	if !allFallback(a, b) {
		t.Fatalf("left the backup: %s", e.describe(a, b))
	}
}

// TestFallbackPostLockFree: on the backup, an application post takes no lock a transition
// holds (backupgate.go). A locked post in Fallback opens the send gate's backup mode (any
// holder of q.mu, a probe for instance, closes it again: the test posts until it finds the
// mode open with q.mu's own mutex held, as by a transition under way); then PostSend posts
// on the backup and returns while that mutex is held. Taking q.mu as its holders do closes
// the mode.
func TestFallbackPostLockFree(t *testing.T) {
	e, a, b := fallenBack(t)
	ha, hb := e.hosts[0], e.hosts[1]
	write := func(id uint64) error {
		return a.PostSend([]verbs.SendWR{{WRID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}})
	}
	id := uint64(1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := write(id); err != nil {
			t.Fatal(err)
		}
		waitN(t, ha.cq, 1)
		id++
		a.mu.Mutex.Lock()
		if a.sendGate.state.Load() == gateBackup {
			break
		}
		a.mu.Mutex.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("the backup mode never open after %d locked posts in Fallback: %s", id-1, e.describe(a, b))
		}
	}
	whileHeld(t, a, "PostSend", func() error { return write(id) })
	if w := waitN(t, ha.cq, 1); w[0].WRID != id || w[0].Status != verbs.WCSuccess {
		t.Fatalf("completion %+v, want wr_id %d", w[0], id)
	}
	a.mu.Lock()
	g := a.sendGate.state.Load()
	a.mu.Unlock()
	if g != gateClosed {
		t.Fatalf("send gate %d with q.mu taken, want closed (%d)", g, gateClosed)
	}

	// The same for receives, on B: each round a RECV and the SEND that consumes it.
	round := func(id uint64) {
		if err := b.PostRecv([]verbs.RecvWR{{WRID: id, SGL: []verbs.SGE{hb.mr.SGE(4096, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend([]verbs.SendWR{{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		waitN(t, ha.cq, 1)
		if w := waitN(t, hb.cq, 1); w[0].WRID != id {
			t.Fatalf("receive completion %+v, want wr_id %d", w[0], id)
		}
	}
	for {
		id++
		round(id)
		b.mu.Mutex.Lock()
		if b.recvGate.state.Load() == gateBackup {
			break
		}
		b.mu.Mutex.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("the receive gate's backup mode never open: %s", e.describe(a, b))
		}
	}
	id++
	whileHeld(t, b, "PostRecv", func() error {
		return b.PostRecv([]verbs.RecvWR{{WRID: id, SGL: []verbs.SGE{hb.mr.SGE(4096, 64)}}})
	})
	if err := a.PostSend([]verbs.SendWR{{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	waitN(t, ha.cq, 1)
	if w := waitN(t, hb.cq, 1); w[0].WRID != id || w[0].Status != verbs.WCSuccess {
		t.Fatalf("receive completion %+v, want wr_id %d", w[0], id)
	}
	if !allFallback(a, b) {
		t.Fatalf("left the backup: %s", e.describe(a, b))
	}
}

// fallenBack connects one QP pair (depth 64, one SGE) and takes host 0's default link down; a
// SEND then makes both QPs fall back, and it returns once both run on the backup.
func fallenBack(t *testing.T) (*testEnv, *QP, *QP) {
	t.Helper()
	e := newEnv(t, 256)
	as, bs := e.pairs(t, 1, verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1})
	a, b := as[0], bs[0]
	e.linkDown(0)
	ha, hb := e.hosts[0], e.hosts[1]
	if err := b.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{hb.mr.SGE(4096, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	waitN(t, ha.cq, 1)
	waitN(t, hb.cq, 1)
	waitFor(t, "both QPs on the backup", func() bool { return allFallback(a, b) }, func() string { return e.describe(a, b) })
	return e, a, b
}

// whileHeld runs post with q.mu's own mutex held by the caller, unlocks it, and fails the
// test if post waited for it.
func whileHeld(t *testing.T, q *QP, what string, post func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- post() }()
	select {
	case err := <-done:
		q.mu.Mutex.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		q.mu.Mutex.Unlock()
		t.Fatalf("%s on the backup waited for q.mu", what)
	}
}
