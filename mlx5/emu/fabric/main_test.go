package fabric_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if tests leave goroutines of this package or sockets behind:
// every Close must stop what Attach and ListenUDP started.
func TestMain(m *testing.M) {
	if addr := os.Getenv(echoEnv); addr != "" {
		os.Exit(echoServer(addr))
	}
	sockets := openSockets()
	code := m.Run()
	if code == 0 {
		if err := checkLeaks(sockets); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// openSockets counts this process's socket descriptors (the runtime's own epoll and eventfd
// descriptors come and go, sockets are only ours).
func openSockets() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

func checkLeaks(sockets int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		leaked := strings.Contains(stacks, "/mlx5/emu/fabric.")
		n := openSockets()
		if !leaked && n <= sockets {
			return nil
		}
		if time.Now().After(deadline) {
			if leaked {
				return fmt.Errorf("leaked goroutines:\n%s", stacks)
			}
			return fmt.Errorf("leaked sockets: %d open after the tests, %d before", n, sockets)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
