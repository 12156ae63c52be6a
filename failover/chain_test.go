package failover

import (
	"fmt"
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestChainedFailures runs three NICs per host: host 0's default NIC fails, then its first
// backup while the stream runs there; the stream goes on on the second backup, delivered
// exactly once and in order. Then the links come back one by one (the first backup, then
// the default) and both QPs recover to the default NIC from the second backup, where a
// second stream runs.
func TestChainedFailures(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	for _, mode := range []streamMode{modeWrite, modeSend} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnvNICs(t, 256, recoverOpts, false, 3)
			a, b := e.pairs(t, 1, cp)
			qa, qb := a[0], b[0]
			if !qa.BackupsReady() || !qb.BackupsReady() {
				t.Fatal("backup sets not all connected after WaitShadow")
			}
			// The first backup fails while the stream runs on it: with a window of 56 WRs,
			// message 120 is posted only after messages past 60 completed there.
			backup1Down := func() { e.cl.Endpoint(0, 1, 1).SetLinkUp(false) }
			s := stream{mode: mode, msgs: 240, size: 4096, failAt: 60, failHost: 0, seed: uint64(40 + int(mode)),
				at: map[int]func(){120: backup1Down}}
			runStream(t, e, qa, qb, s)
			if qa.BackupIndex() != 1 || qb.BackupIndex() != 1 {
				t.Fatalf("backups in use %d %d, want 1 (the second): %s", qa.BackupIndex(), qb.BackupIndex(), e.describe(qa, qb))
			}
			if n := e.hosts[0].ctx.Stats().Chains; n == 0 {
				t.Fatalf("no chained failure counted: %s", e.describe(qa, qb))
			}
			t.Logf("after the chained failure: %s", e.describe(qa, qb))

			// Links back one by one: the first backup (re-armed, unused: rearm_test.go), then
			// the default.
			e.cl.Endpoint(0, 1, 1).SetLinkUp(true)
			e.linkUp(0)
			waitFor(t, "both QPs back on the default NIC", func() bool {
				pollIdle(e)
				return allDefault(qa, qb)
			}, func() string { return e.describe(qa, qb) })
			runStream(t, e, qa, qb, stream{mode: mode, msgs: 100, size: 1000, failAt: -1, seed: uint64(50 + int(mode))})
			if !allDefault(qa, qb) || qa.BackupIndex() != 1 {
				t.Fatalf("after the second stream: %s", e.describe(qa, qb))
			}
		})
	}
}

// TestChainedFailureBothSides: the default fails on host 0, then the first backup fails on
// host 1 (the peer detects it on its own); both sides converge on the second backup.
func TestChainedFailureBothSides(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e := newEnvNICs(t, 256, recoverOpts, false, 3)
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	down := func() { e.cl.Endpoint(1, 1, 1).SetLinkUp(false) }
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 200, size: 2048, failAt: 30, failHost: 0, seed: 61,
		at: map[int]func(){100: down}})
	if qa.BackupIndex() != 1 || qb.BackupIndex() != 1 {
		t.Fatalf("backups in use %d %d, want 1: %s", qa.BackupIndex(), qb.BackupIndex(), e.describe(qa, qb))
	}
}

// TestAllBackupsFailed: with every backup gone the QP fails with errors to the application,
// as with one backup.
func TestAllBackupsFailed(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	e := newEnvNICs(t, 64, recoverOpts, false, 3)
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	for n := range 3 {
		e.cl.Endpoint(0, n, 1).SetLinkUp(false)
	}
	w := verbs.SendWR{WRID: 7, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}
	if err := qa.PostSend([]verbs.SendWR{w}); err != nil {
		t.Fatal(err)
	}
	var wcs [4]verbs.WC
	waitFor(t, "the error completion", func() bool {
		n, _ := ha.cq.Poll(wcs[:])
		return n > 0
	}, func() string { return e.describe(qa, qb) })
	if wcs[0].Status == verbs.WCSuccess || wcs[0].WRID != 7 {
		t.Fatalf("completion %+v, want an error for wr_id 7", wcs[0])
	}
	// The completions are given before the state moves (both under the QP's mutex).
	waitFor(t, "the QP failed", func() bool { return qa.SendState() == SendFailed },
		func() string { return e.describe(qa, qb) })
}

// pollIdle polls both hosts' CQs (recovery needs no application poll, but a CQ with
// completions buffered stays off the fast path until polled); nothing may be there.
func pollIdle(e *testEnv) {
	var wcs [8]verbs.WC
	for _, h := range e.hosts {
		if n, _ := h.cq.Poll(wcs[:]); n > 0 {
			panic(fmt.Sprintf("unexpected completions %+v", wcs[:n]))
		}
	}
}
