package demo

import (
	"os"
	"testing"

	"github.com/shift-rdma/shift/internal/tooltest"
)

func TestMain(m *testing.M) {
	// The runtime opens its network poller's descriptors (epoll, eventfd) on first use, which
	// the first demo run would otherwise count as leaked: open them now.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	code := m.Run()
	tooltest.RemoveBuild() // the plugin TestToolsPart built
	os.Exit(code)
}
