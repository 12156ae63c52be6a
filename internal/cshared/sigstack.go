package cshared

/*
#include <signal.h>

// shift_sig_onstack adds SA_ONSTACK to every installed handler that lacks it, keeping its
// handler, mask and other flags; it returns how many it changed.
static int shift_sig_onstack(void)
{
	int changed = 0;

	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sig == SIGKILL || sig == SIGSTOP || (sig > 31 && sig < SIGRTMIN))
			continue; // not catchable, or glibc's own (SIGCANCEL, SIGSETXID)
		if (sigaction(sig, NULL, &sa) || (sa.sa_flags & SA_ONSTACK))
			continue;
		if (!(sa.sa_flags & SA_SIGINFO) && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue; // no handler runs
		sa.sa_flags |= SA_ONSTACK;
		if (sigaction(sig, &sa, NULL) == 0)
			changed++;
	}
	return changed;
}
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// The application's signal handlers and the Go runtime inside it. A handler the application
// installs without SA_ONSTACK (signal() does: perftest's SIGALRM handler for -D, for one)
// runs on whatever stack the interrupted thread is on. On the Go runtime's own threads, and on
// the application's threads while they run a library's Go code (every post and poll of the
// plugin in SHIFT mode, every emulated kernel call), that is a goroutine's stack: small (2 KiB in
// one crash report), with other goroutines' stacks right below it. The kernel's signal frame
// (it holds the vector registers) and the handler's own frame then overwrite them, and the process crashes
// later somewhere else: ib_write_bw -D through the plugin aborted after its result line, and
// the plugin's bench/sigcheck.c (SIGALRM every 20 µs) crashed within 0.1 s in both modes. Go's
// rule for C code in the same process is that every handler must be installed with
// SA_ONSTACK; programs written for libmlx5 do not know they have Go inside them.
//
// So while one of the library's objects is open, it looks every HandlerPeriod at every
// catchable signal's disposition and adds SA_ONSTACK to a handler that lacks it. A thread with
// an alternate signal stack (every thread Go runs on) then takes the handler there; one
// without, as before, on its own stack. The window between the application's signal() and
// the next look is HandlerPeriod (perftest's first alarm comes a second or more after its
// signal()). A race remains: an application changing a disposition between a look's read and
// write loses its change. SHIFT_SIGNAL_ONSTACK=0 turns this off.

// HandlerPeriod is how often the dispositions are looked at.
const HandlerPeriod = 10 * time.Millisecond

var onStack struct {
	mu    sync.Mutex
	users int
	stop  chan struct{}
	done  chan struct{}
}

// KeepHandlersOnStack starts the looks at the signal dispositions unless they run already
// (one goroutine per process, however many callers) and returns the call that ends the
// caller's interest: the last one stops the goroutine. It returns an error, and starts
// nothing, for a SHIFT_SIGNAL_ONSTACK other than unset, 1 or 0; with 0 it starts nothing.
func KeepHandlersOnStack() (release func(), err error) {
	switch s := os.Getenv("SHIFT_SIGNAL_ONSTACK"); s {
	case "", "1":
	case "0":
		return func() {}, nil
	default:
		return nil, fmt.Errorf("SHIFT_SIGNAL_ONSTACK=%q: want 1 (on, the default) or 0 (off)", s)
	}
	onStack.mu.Lock()
	defer onStack.mu.Unlock()
	if onStack.users++; onStack.users == 1 {
		stop, done := make(chan struct{}), make(chan struct{})
		onStack.stop, onStack.done = stop, done
		C.shift_sig_onstack()
		go func() {
			defer close(done)
			t := time.NewTicker(HandlerPeriod)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					C.shift_sig_onstack()
				}
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(releaseOnStack) }, nil
}

func releaseOnStack() {
	onStack.mu.Lock()
	defer onStack.mu.Unlock()
	if onStack.users--; onStack.users == 0 {
		close(onStack.stop)
		<-onStack.done
	}
}
