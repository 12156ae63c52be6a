package failover

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestTransitionsOffApplicationThreads: with failures on either host, for each kind of
// stream, no fallback round runs inside the application's Poll or PostSend: the data path
// queues what it found and the context's engine (or SHIFT's own event goroutines) runs it.
func TestTransitionsOffApplicationThreads(t *testing.T) {
	var mu sync.Mutex
	var rounds, onEngine int
	var onApp []string
	hook := func() {
		buf := make([]byte, 64<<10)
		st := string(buf[:runtime.Stack(buf, false)])
		mu.Lock()
		defer mu.Unlock()
		rounds++
		if strings.Contains(st, "failover.(*engine).run(") {
			onEngine++
		}
		for _, f := range []string{"failover.(*CQ).Poll(", "failover.(*QP).PostSend(", "failover.(*QP).PostRecv("} {
			if strings.Contains(st, f) {
				onApp = append(onApp, st)
			}
		}
	}
	testHookRound.Store(&hook)
	t.Cleanup(func() { testHookRound.Store(nil) })
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	for _, mode := range []streamMode{modeWrite, modeSend} {
		for _, side := range []int{0, 1} {
			t.Run(fmt.Sprintf("%v/fail-host%d", mode, side), func(t *testing.T) {
				e := newEnv(t, 256)
				a, b := e.pairs(t, 1, cp)
				runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 120, size: 2048, failAt: 60, failHost: side, seed: uint64(7 + side)})
			})
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if rounds == 0 {
		t.Fatal("no fallback round ran: the test observed nothing")
	}
	if len(onApp) > 0 {
		t.Fatalf("%d of %d fallback rounds ran on an application thread; the first:\n%s", len(onApp), rounds, onApp[0])
	}
	t.Logf("%d fallback rounds, none on an application thread, %d on the engine goroutine", rounds, onEngine)
}

// TestEngineDoNow: doNow runs its work on the calling goroutine when the engine is idle,
// and the work queued meanwhile (by that work or by others) before it lets the engine go, in
// arrival order; while the engine is held it queues, and a stepped engine always queues.
// No engine goroutine runs here: whatever ran, the callers ran.
func TestEngineDoNow(t *testing.T) {
	e := newEngine()
	var order []string
	e.doNow(func() {
		order = append(order, "first")
		e.doNow(func() { order = append(order, "nested") }) // held: queued, not run here
		if len(order) != 1 {
			t.Errorf("doNow ran its work while the engine was held: %v", order)
		}
		e.do(func() { order = append(order, "queued") })
	})
	if want := "first nested queued"; strings.Join(order, " ") != want {
		t.Fatalf("ran %q, want %q", strings.Join(order, " "), want)
	}
	if e.running || len(e.work) != 0 {
		t.Fatalf("engine left held (%v) or with work (%d)", e.running, len(e.work))
	}

	// Work queued before doNow runs first: doNow queues behind it, runQueued runs both.
	order = nil
	e.do(func() { order = append(order, "earlier") })
	e.doNow(func() { order = append(order, "later") })
	if len(order) != 0 {
		t.Fatalf("doNow overtook queued work: %v", order)
	}
	if !e.runQueued() || strings.Join(order, " ") != "earlier later" {
		t.Fatalf("ran %v", order)
	}

	s := newEngine()
	s.stepped = true
	ran := false
	s.doNow(func() { ran = true })
	if ran || len(s.work) != 1 {
		t.Fatalf("a stepped engine ran doNow's work inline (ran %v, %d queued)", ran, len(s.work))
	}
}

// TestEngineDoNowHandsOver: work queued while a doNow caller holds the engine runs once it
// lets go, and work queued after that wakes the engine goroutine (no lost wake-up).
func TestEngineDoNowHandsOver(t *testing.T) {
	e := newEngine()
	quit := make(chan struct{})
	go e.run(quit)
	t.Cleanup(func() { close(quit); <-e.done })
	for i := range 1000 {
		var b bool
		done, started := make(chan struct{}), make(chan struct{})
		// The do calls race the holder's last look at the queue and its release.
		go e.doNow(func() { close(started) })
		<-started
		e.do(func() { b = true })
		e.do(func() { close(done) })
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: work queued as the holder let go never ran", i)
		}
		if !b {
			t.Fatalf("round %d: work queued ahead of the last did not run", i)
		}
	}
}
