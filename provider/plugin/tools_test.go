package main

import (
	"fmt"
	"testing"

	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// TestToolsLoopback runs the tool matrix between two processes on loopback addresses, in
// plain mode (the provider) and in SHIFT mode (failover, each device with a backup), with
// no failure: the programs cannot tell the modes apart.
func TestToolsLoopback(t *testing.T) {
	tooltest.RequireTools(t, tooltest.MatrixPrograms()...)
	tooltest.RequireRoot(t)
	b := tooltest.BuildPlugin(t)
	h := tooltest.NewHost(t, b, nil, emusysfs.Shift, devices(addrs(4), "lo")...)
	t.Run("plain", func(t *testing.T) {
		tooltest.RunMatrix(t, tooltest.Matrix(), h, h, tooltest.Mode{}, tooltest.Mode{}, "s0", "s1", "127.0.0.1")
	})
	t.Run("shift", func(t *testing.T) {
		m := tooltest.Mode{Shift: "s0:s1,s2:s3", Job: fmt.Sprintf("tools-%d", port())}
		tooltest.RunMatrix(t, tooltest.Matrix(), h, h, m, m, "s0", "s2", "127.0.0.1")
	})
}
