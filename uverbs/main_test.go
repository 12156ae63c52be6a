package uverbs

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain fails the run if the tests leak file descriptors, goroutines or mappings.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
