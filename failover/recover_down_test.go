package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestDownDuringRecovery: the default link goes down for good after a recovery started,
// while the sender waits for a signaled WR (WaitSignaled: the fence's notification then
// fails) or right after the fence WR was posted (WaitDrained). The QP falls back again and
// the stream completes on the backup with no error, loss, duplicate or reordering.
func TestDownDuringRecovery(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	for _, phase := range []SendState{SendWaitSignaled, SendWaitDrained} {
		for _, mode := range []streamMode{modeWrite, modeSend} {
			t.Run(fmt.Sprintf("%v/%v", phase, mode), func(t *testing.T) {
				e, qa, qb := waitSignaledPair(t, cp, mode, 1)
				h0, h1 := e.hosts[0], e.hosts[1]
				if phase == SendWaitDrained {
					// The application's signaled WR becomes the fence WR; the link goes
					// down with the notification and the WRs behind it on the default QP.
					w := verbs.SendWR{WRID: 1 << 40, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
						SGL: []verbs.SGE{h0.mr.SGE(bufSize-4096, 64)}, RemoteAddr: h1.mr.Addr() + bufSize - 4096, RKey: h1.mr.RKey()}
					if err := qa.PostSend([]verbs.SendWR{w}); err != nil {
						t.Fatal(err)
					}
					if qa.SendState() != SendWaitDrained {
						t.Fatalf("state %v after the fence WR", qa.SendState())
					}
					e.linkDown(1)
					p := &poller{t: t, cq: h0.cq}
					ws := p.next(time.Now().Add(30 * time.Second))
					if len(ws) != 1 || ws[0].WRID != w.WRID || ws[0].Status != verbs.WCSuccess {
						t.Fatalf("fence WR completion %+v", ws)
					}
				} else {
					e.linkDown(1)
				}
				before := e.hosts[0].ctx.Stats().Fallbacks
				runStream(t, e, qa, qb, stream{mode: mode, msgs: 200, size: 512, failAt: -1, seed: 2})
				waitFor(t, "both QPs back on the backup", func() bool { return allFallback(qa, qb) }, func() string { return e.describe(qa, qb) })
				if st := e.hosts[0].ctx.Stats(); st.Fallbacks != before+1 {
					t.Fatalf("fallbacks %d → %d: %s", before, st.Fallbacks, e.describe(qa, qb))
				}
				runStream(t, e, qa, qb, stream{mode: mode, msgs: 100, size: 512, failAt: -1, seed: 3})
			})
		}
	}
}

// TestProbeAfterRoundInWaitSignaled: A's probe succeeded and A waits in WaitSignaled for the
// application's next signaled WR (FenceAfter an hour), when B starts a round (as B does when
// its own probe fails): A's default QP is reset with B's and A is back in Fallback. A must
// probe again: its probe goroutine slept the whole FenceAfter, and A stayed on the backup for
// it (TestDownDuringRecovery timed out so under the race detector, where B's probe failed
// after A's had succeeded).
func TestProbeAfterRoundInWaitSignaled(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e, qa, qb := waitSignaledPair(t, cp, modeWrite, 3)
	h0 := e.hosts[0]
	probes := h0.ctx.Stats().Probes
	qb.c.eng.wait(func() {
		qb.mu.Lock()
		qb.fallbackLocked(ctlMsg{}, false)
		qb.mu.Unlock()
	})
	waitFor(t, "A probing again after B's round", func() bool {
		return h0.ctx.Stats().Probes > probes && qa.SendState() == SendWaitSignaled
	}, func() string { return e.describe(qa, qb) })
	// The application's next signaled WR is the fence: both sides end on the default path.
	runStream(t, e, qa, qb, stream{mode: modeWrite, msgs: 50, size: 512, failAt: -1, seed: 4})
	waitFor(t, "both QPs back to Default", func() bool { return allDefault(qa, qb) }, func() string { return e.describe(qa, qb) })
}

// waitSignaledPair: a stream in mode falls back (host 1's link down), the link comes back and
// A (host 0, FenceAfter an hour) waits in WaitSignaled for the application's next signaled
// WR while B is back on the default path.
func waitSignaledPair(t *testing.T, cp verbs.QPCap, mode streamMode, seed uint64) (*testEnv, *QP, *QP) {
	t.Helper()
	e := newEnvWith(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		if h == 0 {
			o.FenceAfter, o.FenceAfterWRs = time.Hour, 1<<30 // host 0 waits for the application
		}
	})
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	runStream(t, e, qa, qb, stream{mode: mode, msgs: 100, size: 512, failAt: 30, failHost: 1, seed: seed})
	// An unsignaled WRITE left on the backup: no completion retires it, so the backup is not
	// idle and A waits in WaitSignaled for the application's next signaled WR (an idle backup
	// would let SHIFT fence at once).
	h0, h1 := e.hosts[0], e.hosts[1]
	if err := qa.PostSend([]verbs.SendWR{{WRID: 1 << 41, Opcode: verbs.WRRDMAWrite,
		SGL: []verbs.SGE{h0.mr.SGE(bufSize-8192, 64)}, RemoteAddr: h1.mr.Addr() + bufSize - 8192, RKey: h1.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	e.linkUp(1)
	waitFor(t, "A in WaitSignaled", func() bool { return qa.SendState() == SendWaitSignaled && qb.SendState() == SendDefault },
		func() string { return e.describe(qa, qb) })
	return e, qa, qb
}
