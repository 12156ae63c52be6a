package roce_test

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain fails a passing run that leaves goroutines or file descriptors behind: the tshark
// tests start processes and write capture files, and each must be waited for and closed.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
