package main

/*
#include "plugin.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"time"
)

// The application's signal handlers and the Go runtime inside it. A handler the application
// installs without SA_ONSTACK (signal() does: perftest's SIGALRM handler for -D, for one)
// runs on whatever stack the interrupted thread is on. On the Go runtime's own threads, and on
// the application's threads while they run the plugin's Go code (every post and poll in SHIFT
// mode), that is a goroutine's stack: a few KiB with other goroutines' stacks right below it.
// The kernel's signal frame (1–3.5 KiB with the vector registers) and the handler's own frame
// then overwrite them, and the process crashes later somewhere else: ib_write_bw -D aborted
// after its result line, and bench/sigcheck.c (SIGALRM every 20 µs) crashed within 0.1 s in
// both modes (TestSignalHandlerWithoutAltStack). Go's rule for C code in the same process is
// that every handler must be installed with SA_ONSTACK; applications written for libmlx5 do
// not know they have Go inside them.
//
// So while a context is open, the plugin looks every sigFixPeriod at every catchable
// signal's disposition and adds SA_ONSTACK to a handler that lacks it, keeping its handler,
// mask and other flags. A thread with an alternate signal stack (every thread Go runs on) then
// takes the handler there; one without, as before, on its own stack. The window between the
// application's signal() and the next look is sigFixPeriod: perftest's first alarm comes a
// second or more after it. A race remains: an application changing a disposition between
// this look's read and write loses its change (two syscalls apart, every 10 ms).
// SHIFT_SIGNAL_ONSTACK=0 turns this off.

// sigFixPeriod is how often the dispositions are looked at.
const sigFixPeriod = 10 * time.Millisecond

var sigFix struct {
	mu      sync.Mutex
	users   int // open contexts
	stop    chan struct{}
	done    chan struct{}
	changed atomic.Uint64 // handlers given SA_ONSTACK (tests)
}

// sigFixStart counts an open context; the first starts the goroutine.
func sigFixStart() {
	sigFix.mu.Lock()
	defer sigFix.mu.Unlock()
	if sigFix.users++; sigFix.users > 1 {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	sigFix.stop, sigFix.done = stop, done
	sigFix.changed.Add(uint64(C.shift_sig_onstack()))
	go func() {
		defer close(done)
		t := time.NewTicker(sigFixPeriod)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sigFix.changed.Add(uint64(C.shift_sig_onstack()))
			}
		}
	}()
}

// sigFixStop counts a closed context; the last stops the goroutine.
func sigFixStop() {
	sigFix.mu.Lock()
	defer sigFix.mu.Unlock()
	if sigFix.users--; sigFix.users > 0 {
		return
	}
	close(sigFix.stop)
	<-sigFix.done
}
