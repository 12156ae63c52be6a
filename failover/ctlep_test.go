package failover

import (
	"context"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/rc"
	"github.com/shift-rdma/shift/provider/verbs"
)

// ctlPair is a QP pair for the control endpoint tests: qa on host context ha sends to qb on hb.
type ctlPair struct {
	qa, qb *QP
	ha, hb *testHost
}

// burst posts n receives on every pair's qb and n SENDs on its qa, calling fail after the
// first half of the sends, and waits until every SEND and receive completed, in order per QP
// and successfully: the application sees nothing of the fallbacks.
func burst(t *testing.T, ps []ctlPair, n int, fail func()) {
	t.Helper()
	for _, p := range ps {
		for k := range n {
			if err := p.qb.PostRecv([]verbs.RecvWR{{WRID: uint64(k), SGL: []verbs.SGE{p.hb.mr.SGE(k*64, 64)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send := func(from, to int) {
		for _, p := range ps {
			for k := from; k < to; k++ {
				if err := p.qa.PostSend([]verbs.SendWR{{WRID: uint64(k), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{p.ha.mr.SGE(0, 64)}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	send(0, n/2)
	if fail != nil {
		fail()
	}
	send(n/2, n)
	cqs := map[*CQ]bool{}
	next := map[*QP]int{} // next wr_id per QP and direction (qa: sends, qb: receives)
	byQPN := map[*CQ]map[uint32]*QP{}
	for _, p := range ps {
		for _, x := range []struct {
			q *QP
			h *testHost
		}{{p.qa, p.ha}, {p.qb, p.hb}} {
			cqs[x.h.cq] = true
			if byQPN[x.h.cq] == nil {
				byQPN[x.h.cq] = map[uint32]*QP{}
			}
			byQPN[x.h.cq][x.q.QPN()] = x.q
		}
	}
	want, got := 2*n*len(ps), 0
	deadline := time.Now().Add(60 * time.Second)
	var wcs [32]verbs.WC
	for got < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d completions; first pair: %s", got, want, describePair(ps[0]))
		}
		idle := true
		for cq := range cqs {
			m, err := cq.Poll(wcs[:])
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wcs[:m] {
				idle = false
				q := byQPN[cq][w.QPNum]
				if w.Status != verbs.WCSuccess || q == nil || w.WRID != uint64(next[q]) {
					t.Fatalf("completion %+v (%v), want wr_id %d of QP %#x: %s", w, w.Status, next[q], w.QPNum, describePair(ps[0]))
				}
				next[q]++
				got++
			}
		}
		if idle {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

func describePair(p ctlPair) string {
	return p.qa.SendState().String() + "/" + p.qa.RecvState().String() + " " + p.qb.SendState().String() + "/" + p.qb.RecvState().String()
}

func endpoints(h *testHost, dev int) []*ctlEndpoint {
	b := h.ctx.bks[dev]
	b.epMu.Lock()
	defer b.epMu.Unlock()
	var eps []*ctlEndpoint
	for _, ep := range b.eps {
		eps = append(eps, ep)
	}
	return eps
}

// TestSharedControlStorm: 16 QPs between two contexts fail over at once over one control QP
// pair per backup with 4 send and 2 receive slots: the notifications and replies beyond the
// send slots wait in the backlog, those beyond the peer's receive slots are retried by the
// NIC (RNR), and every QP completes its handshake; nothing reaches the application.
func TestSharedControlStorm(t *testing.T) {
	defer func(s, r int) { ctlSendDepth, ctlRecvDepth = s, r }(ctlSendDepth, ctlRecvDepth)
	ctlSendDepth, ctlRecvDepth = 4, 2
	e := newEnv(t, 256)
	a, b := e.pairs(t, 16, smallCap)
	var ps []ctlPair
	for i := range a {
		ps = append(ps, ctlPair{a[i], b[i], e.hosts[0], e.hosts[1]})
	}
	for h := range 2 {
		if eps := endpoints(e.hosts[h], 0); len(eps) != 1 {
			t.Fatalf("host %d: %d control endpoints for 16 QPs towards one peer, want 1", h, len(eps))
		}
	}
	burst(t, ps, 4, func() { e.linkDown(0) })
	for i := range a {
		if a[i].SendState() != SendFallback || b[i].RecvState() != RecvFallback {
			t.Fatalf("pair %d: %s", i, describePair(ps[i]))
		}
	}
	var backlog, rnr uint64
	for h := range 2 {
		ep := endpoints(e.hosts[h], 0)[0]
		var st rc.Stats
		if nq := e.cl.Hosts[h].Devices[1].NIC().QP(ep.qp.QPN()); nq != nil {
			if r, ok := nq.Transport().(*rc.QP); ok {
				st = r.Stats()
			}
		}
		t.Logf("host %d: control endpoint: %d sent (%d through the backlog), %d received, %d dropped; RNR NAKs sent %d, received %d",
			h, ep.sent.Load(), ep.backlogged.Load(), ep.received.Load(), ep.dropped.Load(), st.RNRNAKsSent, st.RNRNAKsReceived)
		backlog += ep.backlogged.Load()
		rnr += st.RNRNAKsReceived
		if ep.failed.Load() || ep.dropped.Load() != 0 || ep.received.Load() < 16 {
			t.Errorf("host %d: endpoint failed %v, %d dropped, %d received", h, ep.failed.Load(), ep.dropped.Load(), ep.received.Load())
		}
	}
	if backlog == 0 {
		t.Errorf("no message waited for a send slot")
	}
	if rnr == 0 {
		t.Logf("no receive slot ran out (no RNR NAK) in this run")
	}
}

// sendRaw posts b as is on the endpoint's control QP (a forged or malformed message).
func sendRaw(t *testing.T, ep *ctlEndpoint, b []byte) {
	t.Helper()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	copy(ep.send[:], b)
	if err := ep.qp.PostSend([]verbs.SendWR{{WRID: ctrlWRID, Opcode: verbs.WRSend,
		Flags: verbs.SendSignaled | verbs.SendInline, SGL: []verbs.SGE{{Addr: sliceAddr(ep.send[:]), Length: uint32(len(b))}}}}); err != nil {
		t.Fatal(err)
	}
	ep.inflight = append(ep.inflight, ctlMsg{}) // no message of ours: nothing to resend
	ep.sent.Add(1)
}

// TestControlPeerContexts: two contexts on the peer host (two processes: the same devices
// and GIDs) are two peers, with a control QP pair each. Messages that name a QP of the other
// context, a QP whose peer is another QP, or that are malformed, are dropped without acting
// on any QP; then both pairs fail over, each on its own control QP pair.
func TestControlPeerContexts(t *testing.T) {
	e := newEnv(t, 256)
	ha, hb1 := e.hosts[0], e.hosts[1]
	hb2 := e.openHost(t, 1, 256, bufSize)
	a1, b1 := e.connect(t, ha, hb1, smallCap, 0x100)
	a2, b2 := e.connect(t, ha, hb2, smallCap, 0x200)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, h := range []*testHost{ha, hb1, hb2} {
		if err := h.ctx.WaitShadow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(endpoints(ha, 0)); n != 2 {
		t.Fatalf("%d control endpoints towards two peer contexts on one host, want 2", n)
	}
	ep1, ep2 := a1.sets[0].ep.Load(), a2.sets[0].ep.Load()
	if ep1 == nil || ep2 == nil || ep1 == ep2 {
		t.Fatalf("endpoints %p %p: want one per peer context", ep1, ep2)
	}
	peer1 := b1.sets[0].ep.Load()
	// Through the pair towards hb1: a message for hb2's QP, one for b1 from a QP that is not
	// its peer, a version 1 message (16 bytes) and one without its magic.
	_ = ep1.sendMsg(ctlMsg{dst: b2.QPN(), src: a2.QPN()})
	_ = ep1.sendMsg(ctlMsg{dst: b1.QPN(), src: a2.QPN()})
	var raw [ctlMsgSize]byte
	ctlMsg{dst: b1.QPN(), src: a1.QPN()}.put(raw[:])
	sendRaw(t, ep1, raw[:16])
	raw[12] ^= 0xff
	sendRaw(t, ep1, raw[:])
	waitFor(t, "the forged messages dropped", func() bool { return peer1.dropped.Load() == 4 },
		func() string { return describePair(ctlPair{qa: a1, qb: b1}) })
	for _, h := range []*testHost{ha, hb1, hb2} {
		if st := h.ctx.Stats(); st.Fallbacks != 0 || st.Refused != 0 || st.Transitions != 0 {
			t.Fatalf("a forged message acted: %+v", st)
		}
	}
	burst(t, []ctlPair{{a1, b1, ha, hb1}, {a2, b2, ha, hb2}}, 4, func() { e.linkDown(0) })
	for _, q := range []*QP{a1, a2} {
		if q.SendState() != SendFallback {
			t.Fatalf("QP %#x: %v, want Fallback", q.QPN(), q.SendState())
		}
	}
	if n1, n2 := b1.sets[0].ep.Load().received.Load(), b2.sets[0].ep.Load().received.Load(); n1 < 3 || n2 < 1 {
		t.Errorf("received %d and %d messages on the two peer contexts' endpoints, want 2 forged + at least 1 and at least 1", n1, n2)
	}
}

// TestControlEndpointFails: the first backup's link is down when the default one fails, so
// the notifications sent on its control QP pair exhaust their retries: the endpoint fails,
// and every QP that was using it moves on to the second backup, whose control QP pair
// carries the round.
func TestControlEndpointFails(t *testing.T) {
	e := newEnvNICs(t, 256, recoverOpts, false, 3)
	a, b := e.pairs(t, 2, smallCap)
	ps := []ctlPair{{a[0], b[0], e.hosts[0], e.hosts[1]}, {a[1], b[1], e.hosts[0], e.hosts[1]}}
	e.cl.Endpoint(0, 1, 1).SetLinkUp(false)
	burst(t, ps, 8, func() { e.linkDown(0) })
	for _, q := range []*QP{a[0], a[1], b[0], b[1]} {
		if q.BackupIndex() != 1 {
			t.Fatalf("QP %#x: backup %d in use, want 1: %s", q.QPN(), q.BackupIndex(), describePair(ps[0]))
		}
	}
	ep := a[0].sets[0].ep.Load()
	if !ep.failed.Load() {
		t.Errorf("the first backup's control endpoint did not fail")
	}
	if n := e.hosts[0].ctx.Stats().Chains; n < 2 {
		t.Errorf("%d chained failures, want one per QP", n)
	}
}

// A control endpoint takes at most the largest timeout whose watchdog (twice the reach) fits
// in half the peer's HandshakeTimeout: a receive-only QP's, connected without the
// connection's timeout, had 537 ms of reach against the simulation's 2 s and let the peer
// give up before a hung NIC was found (internal/sim seed 302807).
func TestCtlTimeout(t *testing.T) {
	for _, tc := range []struct {
		handshake time.Duration
		want      uint8
	}{
		{10 * time.Second, 14}, {20 * time.Second, 14}, {2 * time.Second, 13}, {time.Second, 12}, {50 * time.Millisecond, 10},
	} {
		got := ctlTimeout(tc.handshake)
		if got != tc.want {
			t.Errorf("ctlTimeout(%v) = %d, want %d", tc.handshake, got, tc.want)
		}
		if r := retryReach(verbs.ConnectAttr{Timeout: got, RetryCnt: 7}); got > 10 && 4*r > tc.handshake {
			t.Errorf("ctlTimeout(%v) = %d: reach %v, its watchdog past half the handshake", tc.handshake, got, r)
		}
	}
}
