package failover

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestWatchdogSkipsQueuedFailure: a QP whose error completion was polled and whose fallback
// waits on the engine (failQueued) is not silent, however long it was without a completion
// before: the NIC reported the failure. Found by internal/sim (recovery seed 1903): a host
// paused past the watchdog's bound polled its RETRY_EXC completion on resuming, and the
// watchdog's scan, queued during the pause, ran before the fallback and took the working NIC
// for hung (no probe ever brought the QP back).
func TestWatchdogSkipsQueuedFailure(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	const bound = time.Hour
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.CQWatchdog = bound })
	a, _ := e.pairs(t, 1, cp)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	c := ha.ctx
	// A WRITE that never completes (the NIC hung): the QP has a signaled WR due.
	e.cl.Hosts[0].Devices[0].NIC().Hang()
	w := verbs.SendWR{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ha.mr.SGE(0, 256)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}
	if err := qa.PostSend([]verbs.SendWR{w}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	scan := func(what string, at time.Time, want bool) {
		t.Helper()
		if got := c.watchdogScan(at); got != want {
			t.Fatalf("%s: watchdog fired %v, want %v (stats %+v)", what, got, want, c.Stats())
		}
	}
	scan("first look", t0, false)
	setQueued := func(v bool) {
		qa.fifoMu.Lock()
		qa.failQueued = v
		qa.fifoMu.Unlock()
	}
	setQueued(true) // as the poll of an error completion leaves it until the engine's round
	scan("failure queued, two bounds later", t0.Add(2*bound), false)
	setQueued(false)
	scan("silent again", t0.Add(3*bound), false)
	scan("silent for the bound", t0.Add(4*bound), true)
}
