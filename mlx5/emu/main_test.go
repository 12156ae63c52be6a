package emu_test

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain fails the run if the tests leak descriptors (event files, command files),
// goroutines (NIC watchers, event writers, fabric queues) or mappings.
func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
