package netnstest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
	"github.com/shift-rdma/shift/internal/netnstest"
)

// TestMain fails a passing run that leaves a namespace (and with it its veths), a capture
// goroutine or a socket behind. Only this process's own namespaces are checked, so runs in
// parallel with other packages' namespace tests do not disturb it.
func TestMain(m *testing.M) {
	leakcheck.Main(m, leakcheck.Check("namespaces left", namespacesLeft))
}

func namespacesLeft() error {
	var left []string
	for _, name := range netnstest.Created() {
		if _, err := os.Stat("/var/run/netns/" + name); !errors.Is(err, fs.ErrNotExist) {
			left = append(left, name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("%v", left)
	}
	return nil
}
