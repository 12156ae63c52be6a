package roce_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails a passing run that leaves goroutines or file descriptors behind: the tshark
// tests start processes and write capture files, and each must be waited for and closed.
func TestMain(m *testing.M) {
	// Open the runtime's lazily created descriptors (netpoller) before the baseline.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	g0, f0 := runtime.NumGoroutine(), countFDs()
	code := m.Run()
	// The fuzzing engine keeps its own goroutines and pipes; check plain runs only.
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(code)
	}
	if code == 0 {
		deadline := time.Now().Add(10 * time.Second) // failure guard: leftovers may still be exiting
		for time.Now().Before(deadline) && (runtime.NumGoroutine() > g0 || countFDs() > f0) {
			time.Sleep(10 * time.Millisecond)
		}
		if g, f := runtime.NumGoroutine(), countFDs(); g > g0 || f > f0 {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "leak: goroutines %d→%d, file descriptors %d→%d\n%s", g0, g, f0, f, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
