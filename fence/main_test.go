package fence_test

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain checks that the tests leave no descriptors, goroutines or mappings behind: every
// context, QP and emulated cluster is closed by its test's cleanup.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
