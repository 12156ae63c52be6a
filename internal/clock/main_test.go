package clock

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain fails a passing run that leaves goroutines behind: Real's timers run their
// callbacks on goroutines of their own, and a test must not return before they finish.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
