package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
)

// TestAtomicToolNotRetried pulls host A's default rail under ib_atomic_bw in SHIFT mode. An
// atomic is not idempotent (seed 002, theorem 2a: a FETCH_ADD run twice adds twice), and
// ib_atomic_bw always has atomics in flight, so SHIFT refuses the fallback and the program
// gets the default QP's own error, the transport retry error (status 12) it gets without
// SHIFT, instead of hanging or running an atomic again on the backup.
func TestAtomicToolNotRetried(t *testing.T) {
	p := netnsPair(t, "ib_atomic_bw")
	def := p.Rails[0][0]
	m := tooltest.Mode{Shift: "s0:s1", Job: fmt.Sprintf("atomic-%d", port()), Extra: []string{"SHIFT_DEBUG=1"}}
	args := []string{"-D", "20"}
	srv, cli := p.StartPair(t, m, "ib_atomic_bw", args...)
	d0, _ := p.Traffic(0, def.Name)
	if err := p.WaitTraffic(0, def.Name, d0, 64<<10, cli, 20*time.Second); err != nil {
		t.Fatalf("before the failure: %v\n%s", err, cli.Output())
	}
	def.SetUp(t, false)
	out, err := cli.Wait(60 * time.Second)
	def.SetUp(t, true)
	_, _ = srv.Wait(10 * time.Second) // it fails too: the client stopped answering
	if err == nil {
		t.Fatalf("ib_atomic_bw ran on after its link went down with atomics in flight:\n%s", out)
	}
	if !strings.Contains(out+err.Error(), "Failed status 12") {
		t.Fatalf("ib_atomic_bw failed (%v) without the transport error (status 12):\n%s", err, out)
	}
	// SHIFT_DEBUG=1: the first error completion comes with the QP's state and the counters
	// (the fallback refused for the atomic, nothing reposted); the flushes after it are only
	// counted, in the line the QP's destruction prints when the program gets there.
	log := cli.Log()
	first := strings.Index(log, "completion RETRY_EXC_ERR (12)")
	if first < 0 || !strings.Contains(log[first:], "not retransmission-safe") || !strings.Contains(log[first:], "Refused:1 ") ||
		!strings.Contains(log[first:], "Reposted:0 ") {
		t.Fatalf("no refusal for the atomic in the first error completion's line:\n%s", log)
	}
	if n := strings.Count(log, "libmlx5-shift: s0: completion "); n != 1 {
		t.Fatalf("%d error completions printed, want the first only:\n%s", n, log)
	}
}
