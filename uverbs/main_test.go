package uverbs

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestMain fails the run if the tests leak file descriptors or goroutines.
func TestMain(m *testing.M) {
	// Start the runtime's network poller (epoll fd, eventfd) before counting, so its
	// descriptors do not look like a leak.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	fds, gs := countFDs(), runtime.NumGoroutine()
	code := m.Run()
	// The fuzzing engine keeps its own goroutines and pipes; check leaks on plain runs only.
	fuzzing := false
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		fuzzing = true
	}
	if code == 0 && !fuzzing {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && (countFDs() > fds || runtime.NumGoroutine() > gs) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := countFDs(); n > fds {
			fmt.Fprintf(os.Stderr, "leak: %d file descriptors open before the tests, %d after\n", fds, n)
			code = 1
		}
		if n := runtime.NumGoroutine(); n > gs {
			fmt.Fprintf(os.Stderr, "leak: %d goroutines before the tests, %d after\n", gs, n)
			code = 1
		}
	}
	os.Exit(code)
}
