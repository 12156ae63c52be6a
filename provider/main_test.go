package provider_test

import (
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
	"github.com/shift-rdma/shift/provider"
)

// TestMain checks that the tests leave no descriptors, goroutines or mapped buffers behind:
// every context, channel, CQ, QP and emulated cluster is closed by its test's cleanup.
func TestMain(m *testing.M) {
	leakcheck.Main(m, leakcheck.Counter("provider buffers still mapped", provider.LiveBuffers))
}

// as converts the interface a verbs constructor returns to the provider's concrete type.
func as[T any](v any, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}
