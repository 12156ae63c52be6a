package nic

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain checks that the package's tests leave no goroutine, file descriptor or mapping
// behind: every device closes its watcher and unmaps its UAR pages, every test unmaps what
// it mapped.
func TestMain(m *testing.M) {
	// Warm up what the runtime opens lazily (the netpoller's epoll and event fds, timers) so
	// the baseline does not count them as leaks.
	countFDs()
	countMaps()
	t := time.NewTimer(time.Millisecond)
	<-t.C
	g0, f0, m0 := runtime.NumGoroutine(), countFDs(), countMaps()
	code := m.Run()
	if code == 0 {
		if err := settle(g0, f0, m0); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func settle(g0, f0, m0 int) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		g, f, mm := runtime.NumGoroutine(), countFDs(), countMaps()
		if g <= g0 && f <= f0 && mm <= m0 {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			return fmt.Errorf("goroutines %d→%d, fds %d→%d, mappings %d→%d\n%s", g0, g, f0, f, m0, mm, buf[:n])
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

// countMaps counts the anonymous shared mappings (UAR pages are MAP_SHARED|MAP_ANONYMOUS).
func countMaps() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " rw-s ") {
			n++
		}
	}
	return n
}
