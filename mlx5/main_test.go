package mlx5

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain fails a passing run that leaves goroutines (the concurrent CQ test starts a
// producer), file descriptors or shared mappings (the rings and UAR pages the tests map)
// behind.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
