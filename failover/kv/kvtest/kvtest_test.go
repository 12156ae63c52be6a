package kvtest_test

import (
	"testing"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/failover/kv/kvtest"
)

// TestMem runs the conformance suite over the in-process backend (no namespaces: the
// failover layer prefixes its keys itself).
func TestMem(t *testing.T) {
	m := kv.NewMem()
	kvtest.Run(t, kvtest.Backend{
		Open: func(t testing.TB, job string) kv.Store { return m },
		Break: func(t testing.TB) {
			m.SetDown(true)
			t.Cleanup(func() { m.SetDown(false) })
		},
	})
}
