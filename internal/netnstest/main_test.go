package netnstest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/netnstest"
)

// TestMain fails a passing run that leaves a namespace (and with it its veths), a capture
// goroutine or a socket behind. Only this process's own namespaces are checked, so runs in
// parallel with other packages' namespace tests do not disturb it.
func TestMain(m *testing.M) {
	// Open the runtime's lazily created descriptors (netpoller) before the baseline.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	g0, f0 := runtime.NumGoroutine(), countFDs()
	code := m.Run()
	if code == 0 {
		if err := settle(g0, f0); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func settle(g0, f0 int) error {
	deadline := time.Now().Add(10 * time.Second) // failure guard: leftovers may still be exiting
	for {
		var left []string
		for _, name := range netnstest.Created() {
			if _, err := os.Stat("/var/run/netns/" + name); !errors.Is(err, fs.ErrNotExist) {
				left = append(left, name)
			}
		}
		g, f := runtime.NumGoroutine(), countFDs()
		if len(left) == 0 && g <= g0 && f <= f0 {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("namespaces left %v, goroutines %d→%d, file descriptors %d→%d\n%s",
				left, g0, g, f0, f, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
