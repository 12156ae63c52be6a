package failover

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestReceiveOnlyPeer: perftest's bandwidth servers leave their QP in RTR (only the client
// moves to RTS). After a fallback and the link's return the sender recovers and stays on the
// default path, and the receive-only side never probes: it has no sends to bring back and no
// first send PSN the sender's responder expects. Its probes went out with PSN 0 of each
// incarnation, were never acknowledged, and each failure started a reset round that took
// the sender off the default path it had just recovered (ib_write_bw through the plugin fell
// back again about every second after the link came back). Once back, both QPs are Default in
// both directions and on the lock-free path: the receive-only side's send side returns with
// its receive side and tells the sender, whose receive side waited for a recovery
// notification a QP in RTR cannot send, and whose reset posted no control RECV for it
// (recvonly.go).
//
// "lost": the receive-only side's neverSent message is dropped at the sender (as a message
// for a QP whose set is not connected is dropped); the sender asks for it again after
// HandshakeTimeout and the answer brings its receive side back (before, it stayed on the
// backup until the next failure).
func TestReceiveOnlyPeer(t *testing.T) {
	for _, lose := range []bool{false, true} {
		name := "delivered"
		if lose {
			name = "lost"
		}
		t.Run(name, func(t *testing.T) { receiveOnlyPeer(t, lose) })
	}
}

func receiveOnlyPeer(t *testing.T, lose bool) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e := newEnvWith(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		o.HandshakeTimeout = 300 * time.Millisecond
	})
	ha, hb := e.hosts[0], e.hosts[1]
	var dropped atomic.Int32
	if lose {
		hook := func(_ *ctlEndpoint, m ctlMsg) bool { return m.neverSent && !m.reply && dropped.CompareAndSwap(0, 1) }
		ha.ctx.dropCtl.Store(&hook)
		t.Cleanup(func() { ha.ctx.dropCtl.Store(nil) })
	}
	a, b, aa, ab := e.createPair(t, ha, hb, cp)
	ea := verbs.Endpoint{QPN: a.QPN(), PSN: 0x123456, GID: ha.gid}
	eb := verbs.Endpoint{QPN: b.QPN(), PSN: 0x654321, GID: hb.gid}
	if err := verbs.Connect(a, aa, ea, eb); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ToInit(b, ab); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ToRTR(b, ab, ea); err != nil {
		t.Fatal(err)
	}
	e.waitShadows(t)

	runStream(t, e, a, b, stream{mode: modeWrite, msgs: 200, size: 2048, failAt: 60, failHost: 1, seed: 51})
	if a.SendState() != SendFallback || b.RecvState() != RecvFallback {
		t.Fatalf("states after the failure: %s", e.describe(a, b))
	}
	e.linkUp(1)
	waitFor(t, "both QPs back on the lock-free default path, both directions", func() bool {
		return allDefault(a, b) && onFastPath(a) && onFastPath(b)
	}, func() string { return e.describe(a, b) })
	if lose && (dropped.Load() != 1 || ha.ctx.Stats().NotificationsResent == 0 || hb.ctx.Stats().NotificationsResent == 0) {
		t.Fatalf("dropped %d neverSent messages; asked again %d times, answered %d times: the test lost nothing",
			dropped.Load(), ha.ctx.Stats().NotificationsResent, hb.ctx.Stats().NotificationsResent)
	}
	before := ha.ctx.Stats()
	// Long enough for several of the receive-only side's probe intervals (10–80 ms here).
	for i := range 3 {
		runStream(t, e, a, b, stream{mode: modeWrite, msgs: 200, size: 2048, failAt: -1, seed: 52 + uint64(i)})
	}
	sa, sb := ha.ctx.Stats(), hb.ctx.Stats()
	if sb.Probes != 0 || sb.ProbeFailures != 0 {
		t.Fatalf("the receive-only side probed: %+v", sb)
	}
	if sa.Fallbacks != before.Fallbacks || sa.Reposted != before.Reposted || a.SendState() != SendDefault {
		t.Fatalf("the sender left the default path without a failure: before %+v after %+v", before, sa)
	}
	if !allDefault(a, b) || !onFastPath(a) || !onFastPath(b) {
		t.Fatalf("left the lock-free default path: %s", e.describe(a, b))
	}
}
