package failover

import (
	"sync"
	"sync/atomic"
)

// testHookRound, when set, runs at the start of every fallback round (tests: which goroutine
// runs the transitions).
var testHookRound atomic.Pointer[func()]

// testHookDrain, when set and true for q, keeps q's drain waiting as if the default NIC's
// flushes had not all come (tests: a round that waits).
var testHookDrain atomic.Pointer[func(q *QP) bool]

// engine runs the transitions of a context's QPs in one place, off the application's threads.
// An application Poll that meets an error completion, a peer's notification or a finished
// fence only classifies and queues it on its CQ (toFail, toFailBk, recov, drained) and kicks
// the engine, which runs the queued work (CQ.runPending); link and async events, the
// completion watchdog, the handshake timers and the peers' messages on the shared control QPs
// hand their transitions to it too (do). One goroutine per context runs them in the order they
// came; a goroutine of SHIFT's that reads a peer's message or a link event while the engine is
// idle runs that work itself, holding the engine (doNow). A post that fails on the default QP
// leaves its WRs to the engine (the QP's inbox), which falls the QP back, then posts them
// where the new state says. While CQ work is queued or running the CQ's gate stays closed
// (reopenCQLocked), so the application polls the WC buffer and never sees a completion SHIFT
// has not classified. The probe goroutines keep only their timers and the wait for a probe's
// completion: each step that reads or changes the state runs here, as do SwitchToBackup and
// SwitchToDefault (their callers wait: wait). A round that waits for a NIC's completions waits
// with the QP's mutex released (roundwait.go), so the application's slow path never waits for
// it; the engine does (other QPs' work queues behind the wait).
type engine struct {
	// stepped: no goroutine; Context.Step runs the work and wait runs it inline
	// (Options.Stepped).
	stepped bool
	mu      sync.Mutex
	work    []func() // in arrival order
	// running: a goroutine is running the engine's work (the engine's own, or one of
	// SHIFT's that found it idle: doNow); whoever runs drains work before it lets go.
	running bool
	stopped bool
	wake    chan struct{} // capacity 1
	done    chan struct{} // closed when the goroutine returned
	// waiting are the done channels of callers of wait still queued (released at stop).
	waiting map[chan struct{}]struct{}
}

// newEngine makes the engine when the context is made, before the goroutines that queue
// work on it start (the backup devices' event loops, the link watcher); its own goroutine
// starts once the context is open (startEngine) and runs what was queued meanwhile.
func newEngine() *engine {
	return &engine{wake: make(chan struct{}, 1), done: make(chan struct{}), waiting: map[chan struct{}]struct{}{}}
}

func (c *Context) startEngine() { go c.eng.run(c.quit) }

// do queues fn; it runs on the engine goroutine after what was queued before it. A closing
// context drops it.
func (e *engine) do(fn func()) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.work = append(e.work, fn)
	e.mu.Unlock()
	e.signal()
}

// doNow runs fn on the calling goroutine when the engine is idle (nothing queued or
// running), then whatever was queued meanwhile; otherwise it queues fn as do does. The
// transitions still run one at a time and in arrival order, but the goroutine that read a
// peer's message or a link event does not hand it to the engine's goroutine: that hand-off
// is a wake-up of a parked goroutine, 60–70 µs p50 on the loaded 2-core VM, paid twice on
// a fallback's critical path (the peer's notification, then its reply;
// BenchmarkNetnsLinkDown). Only for SHIFT's own goroutines whose other work may wait for
// the length of a round (the backup devices' event loops, the link watcher, the async
// reader): never an application's thread, and never from the engine's work itself. A
// stepped context queues as do does, so a step runs the same work as before.
func (e *engine) doNow(fn func()) {
	e.mu.Lock()
	if e.stepped || e.stopped || e.running || len(e.work) > 0 {
		e.mu.Unlock()
		e.do(fn)
		return
	}
	e.running = true
	e.mu.Unlock()
	fn()
	e.release()
}

// release runs what was queued while this goroutine held the engine, then lets it go: the
// check for more work and the release are one critical section, so work queued after it
// finds the engine idle and wakes the engine's goroutine.
func (e *engine) release() {
	for {
		e.mu.Lock()
		work := e.work
		e.work = nil
		if len(work) == 0 {
			e.running = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		for _, fn := range work {
			fn()
		}
	}
}

// kick queues cq's pending work for the engine, once until it ran.
func (e *engine) kick(cq *CQ) {
	e.mu.Lock()
	if e.stopped || cq.kicked {
		e.mu.Unlock()
		return
	}
	cq.kicked = true
	e.work = append(e.work, func() {
		e.mu.Lock()
		cq.kicked = false
		e.mu.Unlock()
		cq.runPending()
	})
	e.mu.Unlock()
	e.signal()
}

// wait runs fn on the engine and returns once it ran (true), or once the context is closing
// and fn was dropped (false). For callers off the engine that need a transition's outcome
// (SwitchToBackup, the probe goroutines); the engine itself must never call it.
func (e *engine) wait(fn func()) bool {
	if e.stepped {
		// The caller is the simulation's one thread: what was queued first runs first.
		e.runQueued()
		e.mu.Lock()
		stopped := e.stopped
		e.mu.Unlock()
		if stopped {
			return false
		}
		fn()
		return true
	}
	done := make(chan struct{})
	ran := false
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return false
	}
	e.waiting[done] = struct{}{}
	e.work = append(e.work, func() {
		fn()
		e.mu.Lock()
		ran = true
		delete(e.waiting, done)
		e.mu.Unlock()
		close(done)
	})
	e.mu.Unlock()
	e.signal()
	<-done
	e.mu.Lock()
	defer e.mu.Unlock()
	return ran
}

func (e *engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *engine) run(quit <-chan struct{}) {
	defer close(e.done)
	defer e.stop()
	onGrownStack(func() { e.loop(quit) }) // rounds run here: stack.go
}

// loop runs the queued work each time the engine is woken, until quit.
func (e *engine) loop(quit <-chan struct{}) {
	for {
		select {
		case <-quit:
			return
		case <-e.wake:
		}
		e.runQueued()
	}
}

// runQueued runs the queued work, and what it queues, until none is left; it reports
// whether there was any. While another goroutine runs the engine's work (doNow) it leaves
// the queue to that one, which drains it before letting go.
func (e *engine) runQueued() bool {
	e.mu.Lock()
	if e.running || len(e.work) == 0 {
		e.mu.Unlock()
		return false
	}
	e.running = true
	e.mu.Unlock()
	e.release()
	return true
}

// stop refuses new work, drops what is queued and releases the posts still waiting (the
// context is closing: their QPs are being destroyed).
func (e *engine) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	e.work = nil
	for done := range e.waiting {
		close(done)
	}
	clear(e.waiting)
}
