package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// armed reports whether q's backup set i is live again at generation gen or later.
func armed(q *QP, i int, gen uint32) bool {
	bs := q.sets[i]
	return bs.gen.Load() >= gen && bs.ready.Load() && !q.setDead(i) && !bs.ctlDown()
}

func describeSets(qs ...*QP) string {
	s := ""
	for _, q := range qs {
		s += fmt.Sprintf(" QP %#x in use %d:", q.QPN(), q.BackupIndex())
		for i, bs := range q.sets {
			ep := bs.ep.Load()
			epd := "none"
			if ep != nil {
				epd = fmt.Sprintf("ep gen %d failed %v sent %d received %d dropped %d", ep.gen, ep.failed.Load(),
					ep.sent.Load(), ep.received.Load(), ep.dropped.Load())
			}
			s += fmt.Sprintf(" [set %d gen %d dead %v %s]", i, bs.gen.Load(), q.setDead(i), epd)
		}
	}
	return s
}

// noProbeOpts leaves the default path unprobed for the whole test: a side whose traffic
// did not fail learns of a backup's failure from its peer's notification only.
func noProbeOpts(h int, o *Options) {
	o.ProbeInterval, o.ProbeMaxInterval = time.Minute, time.Minute
}

// TestRearmAfterChain: three NICs per host. Host 0's default NIC fails (the stream moves to
// the first backup), then its first backup (the stream chains to the second). The first
// backup's link returns: both sides rebuild their dead first set (fresh backup QPs through
// the KV, generation 1), host 1 although its own link never went down. Then the second
// backup fails under a second stream: the traffic moves back to the first backup instead
// of failing, exactly once and in order. Nothing probes, so host 1 moves only by following
// host 0's notification on the re-armed set, one before the set it uses.
func TestRearmAfterChain(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	for _, mode := range []streamMode{modeWrite, modeSend} {
		t.Run(mode.String(), func(t *testing.T) {
			e, qa, qb, desc := rearmPair(t, noProbeOpts, cp)
			backup1 := e.cl.Endpoint(0, 1, 1)
			runStream(t, e, qa, qb, stream{mode: mode, msgs: 240, size: 4096, failAt: 60, failHost: 0, seed: uint64(70 + int(mode)),
				at: map[int]func(){120: func() { backup1.SetLinkUp(false) }}})
			if qa.BackupIndex() != 1 || qb.BackupIndex() != 1 {
				t.Fatalf("backups in use %d %d, want 1 (the second): %s", qa.BackupIndex(), qb.BackupIndex(), desc())
			}
			if !qa.setDead(0) || !qb.setDead(0) {
				t.Fatalf("the first set not left dead on both sides: %s", desc())
			}

			t0 := time.Now()
			backup1.SetLinkUp(true)
			waitFor(t, "the first set re-armed on both sides", func() bool { return armed(qa, 0, 1) && armed(qb, 0, 1) }, desc)
			t.Logf("re-armed %v after the link came back", time.Since(t0))
			for h := range 2 {
				if n := e.hosts[h].ctx.Stats().Rearms; n != 1 {
					t.Errorf("host %d: %d sets re-armed, want 1", h, n)
				}
			}
			chains := e.hosts[0].ctx.Stats().Chains

			// The second backup fails while a second stream runs on it (the default NIC is
			// still down): the QPs move to the re-armed first backup.
			backup2 := e.cl.Endpoint(0, 2, 1)
			runStream(t, e, qa, qb, stream{mode: mode, msgs: 200, size: 2048, failAt: -1, seed: uint64(80 + int(mode)),
				at: map[int]func(){60: func() { backup2.SetLinkUp(false) }}})
			if qa.BackupIndex() != 0 || qb.BackupIndex() != 0 {
				t.Fatalf("backups in use %d %d, want 0 (the re-armed first): %s", qa.BackupIndex(), qb.BackupIndex(), desc())
			}
			if n := e.hosts[0].ctx.Stats().Chains; n <= chains {
				t.Fatalf("no chained failure onto the re-armed set: %s", desc())
			}
			for _, q := range []*QP{qa, qb} {
				if st := q.SendState(); st == SendFailed {
					t.Fatalf("QP %#x failed: %s", q.QPN(), desc())
				}
			}
		})
	}
}

// TestRearmControlEndpoint: as in TestControlEndpointFails, the first backup's link is down
// when the default one fails, so its control QP pair fails and the QPs chain to the second
// backup. When the link returns, the control pair is replaced on both sides (generation 1,
// through the KV) and the QPs' first sets are rebuilt; the second backup then fails under a
// burst and every QP completes its fallback handshake on the new control pair.
func TestRearmControlEndpoint(t *testing.T) {
	e := newEnvNICs(t, 256, recoverOpts, false, 3)
	a, b := e.pairs(t, 2, smallCap)
	ps := []ctlPair{{a[0], b[0], e.hosts[0], e.hosts[1]}, {a[1], b[1], e.hosts[0], e.hosts[1]}}
	all := []*QP{a[0], a[1], b[0], b[1]}
	desc := func() string { return describePair(ps[0]) + describeSets(all...) }
	backup1 := e.cl.Endpoint(0, 1, 1)
	backup1.SetLinkUp(false)
	burst(t, ps, 8, func() { e.linkDown(0) })
	old := a[0].sets[0].ep.Load()
	if !old.failed.Load() {
		t.Fatalf("the first backup's control endpoint did not fail: %s", desc())
	}
	for _, q := range all {
		if q.BackupIndex() != 1 {
			t.Fatalf("QP %#x: backup %d in use, want 1: %s", q.QPN(), q.BackupIndex(), desc())
		}
	}

	backup1.SetLinkUp(true)
	waitFor(t, "the control pair and the first sets re-armed", func() bool {
		for _, q := range all {
			ep := q.sets[0].ep.Load()
			if ep == nil || ep.gen < 1 || !ep.connected.Load() || !armed(q, 0, 1) {
				return false
			}
		}
		return true
	}, desc)
	for h := range 2 {
		if n := e.hosts[h].ctx.Stats().CtlRearms; n != 1 {
			t.Errorf("host %d: %d control endpoints re-armed, want 1", h, n)
		}
		if eps := endpoints(e.hosts[h], 0); len(eps) != 1 || eps[0].gen != 1 {
			t.Errorf("host %d: endpoints towards the peer on the first backup: %d", h, len(eps))
		}
	}

	burst(t, ps, 8, func() { e.cl.Endpoint(0, 2, 1).SetLinkUp(false) })
	for _, q := range all {
		if q.BackupIndex() != 0 {
			t.Fatalf("QP %#x: backup %d in use, want 0 (the re-armed first): %s", q.QPN(), q.BackupIndex(), desc())
		}
	}
	for h := range 2 {
		ep := endpoints(e.hosts[h], 0)[0]
		if ep.failed.Load() || ep.received.Load() == 0 {
			t.Errorf("host %d: re-armed control endpoint failed %v, %d messages received", h, ep.failed.Load(), ep.received.Load())
		}
	}
}

// TestRearmLinkUpApart: both hosts' first backups fail, and their links come back at
// different times. Host 1, up first, publishes its rebuilt set and waits (its set stays
// dead: nothing is used half-connected); host 0 joins when its own link is up. Then host
// 1.s second backup fails (host 0, the sender, finds it through its peer this time) and both move to the
// re-armed first backup.
func TestRearmLinkUpApart(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e, qa, qb, desc := rearmPair(t, recoverOpts, cp)
	down := func() {
		e.cl.Endpoint(0, 1, 1).SetLinkUp(false)
		e.cl.Endpoint(1, 1, 1).SetLinkUp(false)
	}
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 200, size: 2048, failAt: 30, failHost: 0, seed: 91,
		at: map[int]func(){100: down}})
	if qa.BackupIndex() != 1 || qb.BackupIndex() != 1 {
		t.Fatalf("backups in use %d %d, want 1: %s", qa.BackupIndex(), qb.BackupIndex(), desc())
	}

	e.cl.Endpoint(1, 1, 1).SetLinkUp(true)
	hb := e.hosts[1]
	key := hb.ctx.qpKeyGen(0, hb.gid, qb.QPN(), 1)
	waitFor(t, "host 1's rebuilt set published", func() bool {
		ctx, cancel := hb.ctx.kvCtx()
		defer cancel()
		_, err := hb.ctx.opts.KV.Get(ctx, key)
		return err == nil
	}, desc)
	if !qa.setDead(0) || !qb.setDead(0) {
		t.Fatalf("a set re-armed before the peer's link was up: %s", desc())
	}

	e.cl.Endpoint(0, 1, 1).SetLinkUp(true)
	waitFor(t, "the first set re-armed on both sides", func() bool { return armed(qa, 0, 1) && armed(qb, 0, 1) }, desc)

	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 200, size: 2048, failAt: -1, seed: 92,
		at: map[int]func(){60: func() { e.cl.Endpoint(1, 2, 1).SetLinkUp(false) }}})
	if qa.BackupIndex() != 0 || qb.BackupIndex() != 0 {
		t.Fatalf("backups in use %d %d, want 0 (the re-armed first): %s", qa.BackupIndex(), qb.BackupIndex(), desc())
	}
}

// TestRearmRepeated: with the default NIC down, the two backups fail in turn, each
// re-armed when its link returns before the other fails: the stream alternates between
// them through successive generations of each set, never failing.
func TestRearmRepeated(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e, qa, qb, desc := rearmPair(t, recoverOpts, cp)
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 100, size: 1024, failAt: 20, failHost: 0, seed: 101})
	for round := range 4 {
		cur := qa.BackupIndex()
		gen := qa.sets[cur].gen.Load()
		link := e.cl.Endpoint(0, 1+cur, 1)
		runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 100, size: 1024, failAt: -1, seed: uint64(110 + round),
			at: map[int]func(){40: func() { link.SetLinkUp(false) }}})
		if qa.BackupIndex() != 1-cur || qb.BackupIndex() != 1-cur {
			t.Fatalf("round %d: backups in use %d %d, want %d: %s", round, qa.BackupIndex(), qb.BackupIndex(), 1-cur, desc())
		}
		link.SetLinkUp(true)
		waitFor(t, fmt.Sprintf("round %d: set %d re-armed on both sides", round, cur),
			func() bool { return armed(qa, cur, gen+1) && armed(qb, cur, gen+1) }, desc)
		t.Logf("round %d: %s", round, describeSets(qa, qb))
	}
	// Each set failed and was rebuilt at least twice (more if a loaded machine made a
	// healthy path time out: that set is rebuilt too).
	if g0, g1 := qa.sets[0].gen.Load(), qa.sets[1].gen.Load(); g0 < 2 || g1 < 2 {
		t.Fatalf("set generations %d %d, want at least 2 each: %s", g0, g1, desc())
	}
}

// rearmPair makes three-NIC hosts with one QP pair between them; desc describes both QPs
// and their sets, and a failed test logs it with their errors.
func rearmPair(t *testing.T, opts func(int, *Options), cp verbs.QPCap) (e *testEnv, qa, qb *QP, desc func() string) {
	t.Helper()
	e = newEnvNICs(t, 256, opts, false, 3)
	a, b := e.pairs(t, 1, cp)
	qa, qb = a[0], b[0]
	desc = func() string { return e.describe(qa, qb) + describeSets(qa, qb) }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("errors %v / %v: %s", qa.Err(), qb.Err(), desc())
		}
	})
	return e, qa, qb, desc
}
