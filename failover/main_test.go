package failover

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain checks that the tests leave no descriptors or goroutines behind: every context,
// its background goroutines and every emulated cluster are closed by the tests' cleanups.
func TestMain(m *testing.M) {
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	fds0, g0 := countFDs(), runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && (runtime.NumGoroutine() > g0 || countFDs() > fds0) {
			time.Sleep(10 * time.Millisecond)
		}
		if fds := countFDs(); fds > fds0 {
			fmt.Fprintf(os.Stderr, "leak: %d file descriptors open, %d before the tests\n", fds, fds0)
			code = 1
		}
		if g := runtime.NumGoroutine(); g > g0 {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "leak: %d goroutines, %d before the tests\n%s\n", g, g0, buf[:runtime.Stack(buf, true)])
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
