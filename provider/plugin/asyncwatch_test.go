package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
)

// TestAsyncWatch runs Debian's ibv_asyncwatch, which prints every event read from its
// context's async fd, on host A's s0 while rails go down and up. Plain, the fd is the
// emulated device's; in SHIFT mode it is the failover context's forwarder (failover/async.go),
// which passes the default device's events on unchanged and keeps the backups' to itself. The
// backup rail goes down and up first, then the default rail: the program must print the
// default's PORT_ERR and PORT_ACTIVE and nothing before them (a backup event forwarded would
// come first: the forwarder keeps the order).
func TestAsyncWatch(t *testing.T) {
	p := netnsPair(t, "ibv_asyncwatch", "stdbuf")
	for _, mode := range []string{"plain", "shift"} {
		t.Run(mode, func(t *testing.T) {
			m := tooltest.Mode{}
			if mode == "shift" {
				m.Shift, m.Job = "s0:s1", fmt.Sprintf("asyncwatch-%d", port())
			}
			// stdbuf: the program's standard output is a pipe here, which C buffers whole.
			aw := p.A.Start(t, m, "stdbuf", "-oL", "ibv_asyncwatch", "-d", "s0")
			waitOutput(t, aw, "async event FD", 20*time.Second)
			def, bk := p.Rails[0][0], p.Rails[1][0]
			bk.SetUp(t, false)
			bk.SetUp(t, true)
			def.SetUp(t, false)
			waitOutput(t, aw, "IBV_EVENT_PORT_ERR", 20*time.Second)
			def.SetUp(t, true)
			out := waitOutput(t, aw, "IBV_EVENT_PORT_ACTIVE", 20*time.Second)
			var events []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "event_type") {
					events = append(events, strings.TrimSpace(l))
				}
			}
			want := []string{"event_type IBV_EVENT_PORT_ERR (10), port 1", "event_type IBV_EVENT_PORT_ACTIVE (9), port 1"}
			if strings.Join(events, "\n") != strings.Join(want, "\n") {
				t.Fatalf("events %q, want %q (the default rail's, and none of the backup's)\n%s", events, want, out)
			}
		})
	}
}

// waitOutput waits until prog has printed s, failing the test after timeout or when prog
// ends first; it returns what prog printed.
func waitOutput(t *testing.T, prog *tooltest.Proc, s string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := prog.Output()
		if strings.Contains(out, s) {
			return out
		}
		if prog.Done() || time.Now().After(deadline) {
			t.Fatalf("%s printed no %q (ended: %v)\n%s", prog.Name, s, prog.Done(), out)
		}
		time.Sleep(10 * time.Millisecond) // polling the output, bounded by the deadline
	}
}
