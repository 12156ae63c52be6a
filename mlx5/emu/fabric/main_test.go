package fabric_test

import (
	"os"
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain fails the package if tests leave goroutines, descriptors (sockets) or mappings
// behind: every Close must stop what Attach and ListenUDP started. A child started with
// echoEnv set runs the echo server instead of the tests.
func TestMain(m *testing.M) {
	if addr := os.Getenv(echoEnv); addr != "" {
		os.Exit(echoServer(addr))
	}
	leakcheck.Main(m)
}
