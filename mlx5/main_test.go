package mlx5

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run if a test leaves goroutines behind (the concurrent CQ test starts a
// producer); mappings are released by each test's Cleanup and checked there.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	// The fuzzing engine keeps its own coordination goroutines; check only plain test runs.
	fuzzing := false
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		fuzzing = true
	}
	if code == 0 && !fuzzing {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			fmt.Fprintf(os.Stderr, "goroutine leak: %d running, %d at start\n", n, before)
			code = 1
		}
	}
	os.Exit(code)
}
