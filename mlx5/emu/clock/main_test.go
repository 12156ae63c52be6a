package clock

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails a passing run that leaves goroutines behind: Real's timers run their
// callbacks on goroutines of their own, and a test must not return before they finish.
func TestMain(m *testing.M) {
	g0 := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(10 * time.Second) // failure guard only
		for time.Now().Before(deadline) && runtime.NumGoroutine() > g0 {
			time.Sleep(10 * time.Millisecond)
		}
		if g := runtime.NumGoroutine(); g > g0 {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "leak: goroutines %d→%d\n%s", g0, g, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}
