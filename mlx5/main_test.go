package mlx5

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails a passing run that leaves goroutines (the concurrent CQ test starts a
// producer), file descriptors or shared mappings (the rings and UAR pages the tests map)
// behind.
func TestMain(m *testing.M) {
	// Open the runtime's lazily created descriptors (netpoller) before the baseline.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	g0, f0, m0 := runtime.NumGoroutine(), countFDs(), countSharedMaps()
	code := m.Run()
	// The fuzzing engine keeps its own coordination goroutines; check only plain test runs.
	fuzzing := false
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		fuzzing = true
	}
	if code == 0 && !fuzzing {
		deadline := time.Now().Add(10 * time.Second) // failure guard: leftovers may still be exiting
		leaked := func() bool {
			return runtime.NumGoroutine() > g0 || countFDs() > f0 || countSharedMaps() > m0
		}
		for leaked() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if leaked() {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "leak: goroutines %d→%d, file descriptors %d→%d, shared mappings %d→%d\n%s",
				g0, runtime.NumGoroutine(), f0, countFDs(), m0, countSharedMaps(), buf[:runtime.Stack(buf, true)])
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

// countSharedMaps counts the process's shared writable mappings: the tests' rings and UAR
// pages are MAP_SHARED, and the Go runtime makes none of its own.
func countSharedMaps() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), " rw-s ")
}
