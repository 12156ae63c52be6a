package main

import (
	"fmt"
	"testing"

	"github.com/shift-rdma/shift/internal/tooltest"
)

// TestToolsNetns runs the tool matrix between two hosts in two network namespaces, each
// program's emulated NIC sending RoCEv2 over a veth of its own namespace, in plain and SHIFT
// mode (backup NICs on a second rail), with no failure.
func TestToolsNetns(t *testing.T) {
	p := netnsPair(t, tooltest.MatrixPrograms()...)
	t.Run("plain", func(t *testing.T) {
		tooltest.RunMatrix(t, tooltest.Matrix(), p.B, p.A, tooltest.Mode{}, tooltest.Mode{}, "s0", "s0", p.CtlAddr(1))
	})
	t.Run("shift", func(t *testing.T) {
		m := tooltest.Mode{Shift: "s0:s1", Job: fmt.Sprintf("netns-%d", port())}
		tooltest.RunMatrix(t, tooltest.Matrix(), p.B, p.A, m, m, "s0", "s0", p.CtlAddr(1))
	})
}
