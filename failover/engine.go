package failover

import (
	"sync"
	"sync/atomic"
)

// testHookRound, when set, runs at the start of every fallback round (tests: which goroutine
// runs the transitions).
var testHookRound atomic.Pointer[func()]

// engine runs the transitions the data path finds off the application's threads: an
// application Poll that meets an error completion, a peer's notification or a finished
// fence only classifies and queues it on its CQ (toFail, toFailBk, recov, drained) and
// kicks the engine; one goroutine per context then runs the queued work (CQ.runPending),
// which takes QP mutexes, drains default QPs and posts on other QPs. A failed post waits for
// the engine's fallback of its QP, then posts where the new state says. While work is queued
// or running the CQ's gate stays closed (reopenCQLocked), so the application polls the WC
// buffer and never sees a completion SHIFT has not classified.
type engine struct {
	mu      sync.Mutex
	cqs     []*CQ      // CQs with queued work, each once (CQ.kicked)
	posts   []*postReq // failed posts waiting for their QP's fallback
	stopped bool
	wake    chan struct{} // capacity 1
	done    chan struct{} // closed when the goroutine returned
}

type postReq struct {
	q    *QP
	done chan struct{}
}

func (c *Context) startEngine() {
	c.eng = &engine{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.eng.run(c.quit)
}

// kick queues cq's pending work for the engine.
func (e *engine) kick(cq *CQ) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	if !cq.kicked {
		cq.kicked = true
		e.cqs = append(e.cqs, cq)
	}
	e.mu.Unlock()
	e.signal()
}

// fallbackWait has the engine fall q back (a post failed on its default QP) and returns once
// it did, or once the context is closing.
func (e *engine) fallbackWait(q *QP) {
	r := &postReq{q: q, done: make(chan struct{})}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.posts = append(e.posts, r)
	e.mu.Unlock()
	e.signal()
	<-r.done
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
	for {
		select {
		case <-quit:
			return
		case <-e.wake:
		}
		for {
			e.mu.Lock()
			cqs, posts := e.cqs, e.posts
			e.cqs, e.posts = nil, nil
			for _, cq := range cqs {
				cq.kicked = false
			}
			e.mu.Unlock()
			if len(cqs) == 0 && len(posts) == 0 {
				break
			}
			for _, r := range posts {
				r.q.fallback(ctlMsg{}, false)
				close(r.done)
			}
			for _, cq := range cqs {
				cq.runPending()
			}
		}
	}
}

// stop refuses new work and releases the posts still waiting (the context is closing: their
// QPs are being destroyed).
func (e *engine) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	for _, r := range e.posts {
		close(r.done)
	}
	e.posts = nil
	e.cqs = nil
}
