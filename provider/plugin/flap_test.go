package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
)

// TestFlappingUnderTools takes the default rail of host A, then of host B, then A and B
// again, down and up under one run of ib_send_lat: each recovery leaves both sides' 512
// receives stale on their backup QPs, and each later fallback consumes them with fillers
// first. The fillers of the second fallback overran the backup send CQ, which perftest
// sizes for its one send in flight, and both QPs failed (failover.fillerWindow).
func TestFlappingUnderTools(t *testing.T) {
	p := netnsPair(t, "ib_send_lat")
	runClocked(t, "ib_send_lat", func() (string, error, string, error) { return flapRun(t, p) }, checkLatDuration)
}

// flapRun is one run of TestFlappingUnderTools; it returns both programs' outputs and errors.
func flapRun(t *testing.T, p *tooltest.NetnsPair) (cout string, cerr error, sout string, serr error) {
	t.Helper()
	m := tooltest.Mode{Shift: "s0:s1", Job: fmt.Sprintf("flap-%d", port()), Extra: []string{"SHIFT_DEBUG=1"}}
	args := []string{"-D", "12", "-s", "4096"}
	srv, cli := p.StartPair(t, m, "ib_send_lat", args...)
	const some = 256 << 10 // bytes: a few dozen round trips of 4 KiB each way
	for cycle := range 4 {
		h := cycle % 2
		def, bk := p.Rails[0][h], p.Rails[1][h]
		d0, _ := p.Traffic(h, def.Name)
		if err := p.WaitTraffic(h, def.Name, d0, some, cli, 20*time.Second); err != nil {
			t.Fatalf("cycle %d, host %d's default rail before the down: %v\n%s", cycle, h, err, cli.Output())
		}
		b0, _ := p.Traffic(h, bk.Name)
		def.SetUp(t, false)
		if err := p.WaitTraffic(h, bk.Name, b0, some, cli, 20*time.Second); err != nil {
			t.Fatalf("cycle %d, host %d's default rail down: no traffic on the backup: %v\n%s", cycle, h, err, cli.Output())
		}
		def.SetUp(t, true)
	}
	cout, cerr = cli.Wait(60 * time.Second)
	sout, serr = srv.Wait(60 * time.Second)
	return cout, cerr, sout, serr
}
