package failover

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain checks that the tests leave no descriptors, goroutines or mappings behind: every
// context, its background goroutines and every emulated cluster are closed by the tests'
// cleanups.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
