package failover

import (
	"bytes"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestLinkDownFallsBackWithoutPolling: the sender's default link goes down while its last
// WRs (unsignaled WRITEs and an unsignaled WRITE_WITH_IMM) are outstanding, and the sender
// never polls. Only the link event can start the fallback: the WRs are reposted on the
// backup and the receiver gets the WRITE_WITH_IMM with every WRITE's data in place.
func TestLinkDownFallsBackWithoutPolling(t *testing.T) {
	linkDownWithoutPolling(t, newEnvCfg(t, 256, recoverOpts, true))
}

// TestNetnsLinkWatch is the same over RoCEv2 between namespaces, with the link events of a
// real probe.Watcher (eBPF or netlink) on the default veth, which `ip link set down` fails.
func TestNetnsLinkWatch(t *testing.T) {
	linkDownWithoutPolling(t, newNetnsEnvCfg(t, recoverOpts, true))
}

func linkDownWithoutPolling(t *testing.T, e *testEnv) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	runStream(t, e, qa, qb, stream{mode: modeWrite, msgs: 20, size: 512, failAt: -1, seed: 21})
	if err := qb.PostRecv([]verbs.RecvWR{{WRID: 77, SGL: []verbs.SGE{hb.mr.SGE(bufSize/2, 64)}}}); err != nil {
		t.Fatal(err)
	}
	const n, size = 8, 256
	payload(ha.buf.Bytes()[:n*size], 22, 0)
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(100 + i), Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(i*size, size)},
			RemoteAddr: hb.mr.Addr() + uint64(i*size), RKey: hb.mr.RKey()}
	}
	wrs[n-1].Opcode, wrs[n-1].Imm = verbs.WRRDMAWriteWithImm, 7
	e.linkDown(0)
	start := time.Now()
	if err := qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	p := &poller{t: t, cq: hb.cq}
	ws := p.next(time.Now().Add(20 * time.Second))
	if len(ws) != 1 || ws[0].WRID != 77 || ws[0].Status != verbs.WCSuccess || ws[0].Opcode != verbs.WCRecvRDMAWithImm || ws[0].Imm != 7 {
		t.Fatalf("receiver: %+v; %s", ws, e.describe(qa, qb))
	}
	if !bytes.Equal(hb.buf.Bytes()[:n*size], ha.buf.Bytes()[:n*size]) {
		t.Fatal("the WRITEs' data is not in place at the WRITE_WITH_IMM")
	}
	// The link watcher's down event and the device's PORT_ERR race to start it, on either
	// host: both ends of the link go down, and the host that sees it first falls back and
	// notifies the other, whose own event may come after (seen under -race). Fallbacks
	// counts a fallback once its last WR is reposted, and the receiver may have polled that
	// WR's completion first: the reposting goroutine's doorbell yields its processor to the
	// emulated NIC (seen once in make test).
	var st Stats
	waitFor(t, "the link event's fallback counted", func() bool {
		st = ha.ctx.Stats()
		sb := hb.ctx.Stats()
		return st.LinkFallbacks+st.EventFallbacks+sb.LinkFallbacks+sb.EventFallbacks > 0 && st.Fallbacks > 0
	}, func() string { return e.describe(qa, qb) })
	t.Logf("link down → message on the backup: %v; A %+v", time.Since(start), st)
	// The sender's CQ holds nothing for it: every WR was unsignaled and none failed.
	if ws := (&poller{t: t, cq: ha.cq}).next(time.Now()); len(ws) != 0 {
		t.Fatalf("sender completions %+v", ws)
	}
	e.linkUp(0)
	waitFor(t, "both QPs back on the default NIC", func() bool { return allDefault(qa, qb) }, func() string { return e.describe(qa, qb) })
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 50, size: 512, failAt: -1, seed: 23})
}

// The link watcher's default: none for an emulated device (its netdev is a stand-in; the
// fabric feeds its link events), and LinkWatch says so; NoLinkWatch says it is off; events
// given in Options are "events".
func TestLinkWatchDefault(t *testing.T) {
	e := newEnv(t, 64)
	if got, want := e.hosts[0].ctx.LinkWatch(), "none: emulated device, its link events come from the fabric"; got != want {
		t.Errorf("default on an emulated device: %q, want %q", got, want)
	}
	off := newEnvWith(t, 64, func(h int, o *Options) { o.NoLinkWatch = true })
	if got := off.hosts[0].ctx.LinkWatch(); got != "none: off (NoLinkWatch)" {
		t.Errorf("NoLinkWatch: %q", got)
	}
	ev := newEnvCfg(t, 64, nil, true)
	if got := ev.hosts[0].ctx.LinkWatch(); got != "events" {
		t.Errorf("LinkEvents: %q", got)
	}
}

// TestLinkDownBeforeConnect: the default link goes down while the application is still
// connecting its QPs (both in INIT). SHIFT leaves them alone, the application's connect
// succeeds, and once the link is back its traffic runs on the default NIC. Moving such a QP
// to ERR failed the application's modify to RTR.
func TestLinkDownBeforeConnect(t *testing.T) {
	e := newEnvCfg(t, 256, recoverOpts, true)
	ha, hb := e.hosts[0], e.hosts[1]
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	qa, qb, aa, ab := e.createPair(t, ha, hb, cp)
	for _, q := range []struct {
		qp *QP
		a  verbs.ConnectAttr
	}{{qa, aa}, {qb, ab}} {
		if err := verbs.ToInit(q.qp, q.a); err != nil {
			t.Fatal(err)
		}
	}
	e.linkDown(0)
	// Both reports of the down, the link watcher's and the device's PORT_ERR: one read after
	// the QPs are connected would rightly move them to the backup (the link is still down).
	waitFor(t, "the link event and PORT_ERR", func() bool {
		st := ha.ctx.Stats()
		return st.LinkEvents > 0 && st.AsyncEvents > 0
	}, func() string { return e.describe(qa, qb) })
	ha.ctx.eng.wait(func() {}) // the events' fallback passes, queued or running, are over
	if st := ha.ctx.Stats(); st.LinkFallbacks != 0 || st.Fallbacks != 0 || qa.Default().State() != verbs.QPStateInit {
		t.Fatalf("a QP in INIT was taken down: default QP %v, %+v", qa.Default().State(), st)
	}
	ea := verbs.Endpoint{QPN: qa.QPN(), PSN: 0x100, GID: ha.gid}
	eb := verbs.Endpoint{QPN: qb.QPN(), PSN: 0x8100, GID: hb.gid}
	if err := verbs.ToRTR(qa, aa, eb); err != nil {
		t.Fatalf("connect with the link down: %v", err)
	}
	if err := verbs.ToRTS(qa, aa, ea.PSN); err != nil {
		t.Fatalf("connect with the link down: %v", err)
	}
	if err := verbs.ToRTR(qb, ab, ea); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ToRTS(qb, ab, eb.PSN); err != nil {
		t.Fatal(err)
	}
	e.linkUp(0)
	e.waitShadows(t)
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 50, size: 512, failAt: -1, seed: 24})
	if !allDefault(qa, qb) {
		t.Fatalf("left the default path: %s", e.describe(qa, qb))
	}
}
