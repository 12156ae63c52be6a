package nic

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain checks that the package's tests leave no goroutine, file descriptor or mapping
// behind: every device closes its watcher and unmaps its UAR pages, every test unmaps what
// it mapped.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
