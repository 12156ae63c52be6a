package emu_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run if the tests leak descriptors (event files, command files) or
// goroutines (NIC watchers, event writers, fabric queues).
func TestMain(m *testing.M) {
	// The runtime's network poller keeps two descriptors (epoll and an eventfd) once any
	// pollable file exists (os/exec pipes, for instance); start it before counting.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	fds0 := countFDs()
	g0 := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if err := settle(fds0, g0); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// settle waits (bounded) for asynchronous teardown, then compares.
func settle(fds0, g0 int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		fds, g := countFDs(), runtime.NumGoroutine()
		if fds <= fds0 && g <= g0 {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			stacks := string(buf[:n])
			if g <= g0 {
				stacks = ""
			}
			return fmt.Errorf("%d fds (were %d), %d goroutines (were %d)\n%s", fds, fds0, g, g0, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
