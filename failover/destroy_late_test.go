package failover

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestDestroyWhileProbing: the application tears down (destroy_qp, then destroy_cq, as
// perftest does at its end) while SHIFT's probe of the QP waits for its completion. The wait
// ends with the QP: it polled the CQ every 500 µs until the context closed, and a poll of
// the destroyed CQ read its unmapped ring (ib_write_bw through the plugin aborted after its
// result line).
func TestDestroyWhileProbing(t *testing.T) {
	e := newEnvWith(t, 256, recoverOpts)
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	a, b := e.pairs(t, 1, cp)
	runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 100, size: 512, failAt: 30, failHost: 1, seed: 61})
	ha := e.hosts[0]
	// The link stays down: the probe's WRITE is lost and its wait lasts the RC retries.
	waitFor(t, "a probe waiting for its completion", func() bool {
		a[0].mu.Lock()
		defer a[0].mu.Unlock()
		return (a[0].mach.probeState() == ProbeRunning) && ha.ctx.Stats().Probes > 0
	}, func() string { return e.describe(a[0], b[0]) })
	if err := a[0].Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := ha.cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the probe goroutine to end with its QP", func() bool {
		a[0].mu.Lock()
		defer a[0].mu.Unlock()
		return !(a[0].mach.probeState() == ProbeRunning)
	}, func() string { return e.describe(a[0], b[0]) })
	// Long enough for polls every 500 µs, were the wait still polling the destroyed CQ.
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
		ha.cq.pollAside()
		time.Sleep(time.Millisecond)
	}
}

// TestCQDestroyReleasesSharedGate: once Destroy returns, the word a C data path shared with
// the CQ (ShareGate) is the caller's again: the plugin frees it with its struct shift_cq,
// and SHIFT's late work on the CQ (a backup CQ's completions, a queued kick, the flushes of
// a failed set, which close the gate) must not write into freed memory.
func TestCQDestroyReleasesSharedGate(t *testing.T) {
	e := newEnv(t, 64)
	cq, err := as[*CQ](e.hosts[0].ctx.CreateCQ(verbs.CQInitAttr{CQE: 16}))
	if err != nil {
		t.Fatal(err)
	}
	var w atomic.Uint32
	cq.ShareGate(&w)
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	const freed = gateOpen // what freed memory may hold: a late close would write it
	w.Store(freed)
	cq.onBackupEvent(0)
	cq.runPending()
	cq.pollAside()
	closeGate(cq.gate) // as giveUpSetLocked and synthRecvErrorsLocked close it
	if v := w.Load(); v != freed {
		t.Fatalf("the shared gate word was written after Destroy: %d", v)
	}
}
