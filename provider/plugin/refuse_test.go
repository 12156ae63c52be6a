package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// TestRefusedSaysWhy runs Debian's example programs for what the provider does not offer (UC
// and UD QPs, shared receive queues, XRC), plain and SHIFT: each fails as it would on a
// device without the feature, and standard error names the verb, the reason and the errno
// (refuse.c), which the programs' own messages ("Couldn't create QP") do not.
func TestRefusedSaysWhy(t *testing.T) {
	runs := []struct{ program, line string }{
		{"ibv_uc_pingpong", "libmlx5-shift: create_qp: UC QPs are not offered (RC only): Operation not supported"},
		{"ibv_ud_pingpong", "libmlx5-shift: create_qp: UD QPs are not offered (RC only): Operation not supported"},
		{"ibv_srq_pingpong", "libmlx5-shift: create_srq: shared receive queues are not offered: Operation not supported"},
		{"ibv_xsrq_pingpong", "libmlx5-shift: open_xrcd: XRC domains are not offered: Operation not supported"},
	}
	var programs []string
	for _, r := range runs {
		programs = append(programs, r.program)
	}
	tooltest.RequireTools(t, programs...)
	h := tooltest.NewHost(t, tooltest.BuildPlugin(t), nil, emusysfs.Shift, devices(addrs(2), "lo")...)
	for _, mode := range []string{"plain", "shift"} {
		m := tooltest.Mode{}
		if mode == "shift" {
			m.Shift, m.Job = "s0:s1", fmt.Sprintf("refuse-%d", port())
		}
		for _, r := range runs {
			t.Run(mode+"/"+r.program, func(t *testing.T) {
				p := h.Start(t, m, r.program, "-d", "s0", "-g", "0", "-p", fmt.Sprint(port()))
				out, err := p.Wait(30 * time.Second)
				if err == nil {
					t.Fatalf("%s (a server) ended with exit 0; want its failure\n%s", r.program, out)
				}
				if got := p.Log(); strings.Count(got, r.line) != 1 {
					t.Fatalf("standard error does not say %q once:\n%s", r.line, got)
				}
			})
		}
	}
}
