package failover

import (
	"bytes"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestFallbackAfterUnsignaledTail: the last WRs on the default QP are unsignaled and have
// completed (no completion will ever name them) when the peer moves the pair to the backup.
// The drain must not wait for them: the QP falls back at once, without error, and the WRITEs
// that are retransmitted land with the same data.
func TestFallbackAfterUnsignaledTail(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e := newEnvWith(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		o.DrainTimeout = 5 * time.Second // far beyond a drain that works; shorter than the test guard
	})
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	payload(ha.buf.Bytes()[:192], 11, 0)
	wrs := []verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(64, 64)}, RemoteAddr: hb.mr.Addr() + 64, RKey: hb.mr.RKey()},
		{WRID: 3, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(128, 64)}, RemoteAddr: hb.mr.Addr() + 128, RKey: hb.mr.RKey()},
	}
	if err := qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	p := &poller{t: t, cq: ha.cq}
	if ws := p.next(time.Now().Add(20 * time.Second)); len(ws) != 1 || ws[0].WRID != 1 || ws[0].Status != verbs.WCSuccess {
		t.Fatalf("completion %+v", ws)
	}
	waitFor(t, "the unsignaled WRITEs to land", func() bool {
		return bytes.Equal(hb.buf.Bytes()[:192], ha.buf.Bytes()[:192])
	}, func() string { return e.describe(qa, qb) })
	time.Sleep(5 * time.Millisecond) // their ACKs: the requester retires them without a completion
	start := time.Now()
	if err := qb.SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	// Both sides count the fallback once it completed; A then probes its default path and may
	// recover within a few ms (recoverOpts), so a wait for both to be on the backup at one
	// instant can miss that window on a loaded machine.
	waitFor(t, "both QPs to complete the fallback", func() bool {
		return ha.ctx.Stats().Fallbacks >= 1 && hb.ctx.Stats().Fallbacks >= 1
	}, func() string { return e.describe(qa, qb) })
	if d := time.Since(start); d >= 5*time.Second {
		t.Fatalf("the fallback took %v: the drain waited for WQEs that will never complete", d)
	}
	if qa.Err() != nil || qb.Err() != nil {
		t.Fatalf("errors: A %v B %v", qa.Err(), qb.Err())
	}
	if ws := p.next(time.Now()); len(ws) != 0 {
		t.Fatalf("completions for unsignaled WRs: %+v", ws)
	}
	if !bytes.Equal(hb.buf.Bytes()[:192], ha.buf.Bytes()[:192]) {
		t.Fatal("the WRITEs' data changed")
	}
	runStream(t, e, qa, qb, stream{mode: modeWrite, msgs: 50, size: 512, failAt: -1, seed: 12})
}
