package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// modes are plain mode and SHIFT mode on a host with devices s0 and s1 (each the other's
// backup).
func modes() []struct {
	name string
	mode tooltest.Mode
} {
	return []struct {
		name string
		mode tooltest.Mode
	}{
		{"plain", tooltest.Mode{}},
		{"shift", tooltest.Mode{Shift: "s0:s1,s1:s0", Job: fmt.Sprintf("cycle-%d", port())}},
	}
}

// TestQPLifecycle runs bench/qpcycle.c (two QPs on one CQ: destroy one with completions
// possibly unpolled, RESET and reconnect the other) in plain mode, where C owns the rings and
// must clean the CQ and reset the indices itself, and in SHIFT mode.
func TestQPLifecycle(t *testing.T) {
	b := tooltest.BuildPlugin(t)
	bin := harness(t, "qpcycle")
	h := tooltest.NewHost(t, b, nil, emusysfs.Shift, devices(addrs(2), "lo")...)
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			// Several rounds: whether A's completions are still in the CQ when it is
			// destroyed depends on the emulator's timing.
			for round := range 5 {
				out, err := h.Start(t, m.mode, bin, "-d", "s0", "-D", "s1").Wait(time.Minute)
				if err != nil || !strings.Contains(out, "qpcycle: ok") {
					t.Fatalf("round %d: %v\n%s", round, err, out)
				}
			}
		})
	}
}

// TestForkWithoutExec runs bench/forkcheck.c: a process with connected QPs forks; the child
// gets errors from the verbs instead of hanging, the parent's traffic goes on.
func TestForkWithoutExec(t *testing.T) {
	b := tooltest.BuildPlugin(t)
	bin := harness(t, "forkcheck")
	h := tooltest.NewHost(t, b, nil, emusysfs.Shift, devices(addrs(2), "lo")...)
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			m.mode.Extra = append(m.mode.Extra, "RDMAV_FORK_SAFE=1")
			out, err := h.Start(t, m.mode, bin, "-d", "s0", "-D", "s1").Wait(time.Minute)
			if err != nil || !strings.Contains(out, "forkcheck: ok") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestSignalHandlerWithoutAltStack runs bench/sigcheck.c: SIGALRM every 20 µs, handled by a
// handler installed with signal() (no SA_ONSTACK, as perftest's -D installs its own), while
// WRITEs go through the plugin. Without the plugin adding SA_ONSTACK (internal/cshared/sigstack.go;
// SHIFT_SIGNAL_ONSTACK=0) the handler ran on goroutine stacks and the program crashed within
// 0.1 s in both modes, in SHIFT mode with SIGABRT as ib_write_bw did in CI.
func TestSignalHandlerWithoutAltStack(t *testing.T) {
	b := tooltest.BuildPlugin(t)
	bin := harness(t, "sigcheck")
	h := tooltest.NewHost(t, b, nil, emusysfs.Shift, devices(addrs(2), "lo")...)
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			out, err := h.Start(t, m.mode, bin, "-d", "s0", "-D", "s1").Wait(3 * time.Minute)
			if err != nil || !strings.Contains(out, "sigcheck: ok") || strings.Contains(out, "did not get SA_ONSTACK") {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Log(strings.TrimSpace(out))
		})
	}
}
