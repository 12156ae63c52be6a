package failover

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestUpProbeDelay: an up event brings the next probe step to ProbeInterval after the last
// probe posted, never later than it was due, never before now.
func TestUpProbeDelay(t *testing.T) {
	o := &Options{ProbeInterval: 100 * time.Millisecond}
	now := time.Unix(1000, 0)
	ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	for _, c := range []struct {
		name      string
		due       time.Duration // from now
		lastStart int64
		want      time.Duration
	}{
		{"long back-off", 1600 * time.Millisecond, ns(-700 * time.Millisecond), 0},
		{"last probe recent", 1600 * time.Millisecond, ns(-30 * time.Millisecond), 70 * time.Millisecond},
		{"due sooner anyway", 20 * time.Millisecond, ns(-30 * time.Millisecond), 20 * time.Millisecond},
		{"no probe yet, or the last given up", 80 * time.Millisecond, 0, 0},
		{"overdue", -5 * time.Millisecond, ns(-time.Second), 0},
	} {
		if got := upProbeDelay(now, now.Add(c.due), c.lastStart, o); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLinkUpProbesAtOnce: the default link stays down long enough for the probes to back
// off (ProbeMaxInterval an hour: after six failed probes the next waits 1.28 s, after
// seven 2.56 s, and so on), then comes back. The up event starts the back-off over and the
// next probe runs at once, so A's sends are back on the default NIC without waiting for it:
// LinkUpProbes counts the step brought forward (0 without probe_up.go).
func TestLinkUpProbesAtOnce(t *testing.T) {
	e, qa, qb := upPair(t, fastAttr, 31)
	ha := e.hosts[0]
	e.linkDown(0)
	waitFor(t, "six failed probes of host A", func() bool { return ha.ctx.Stats().ProbeFailures >= 6 },
		func() string { return e.describe(qa, qb) })
	e.linkUp(0)
	start := time.Now()
	waitFor(t, "A's sends back on the default NIC", func() bool { return qa.SendState() == SendDefault },
		func() string { return e.describe(qa, qb) })
	back := time.Since(start)
	if sa := ha.ctx.Stats(); sa.LinkUpProbes == 0 {
		t.Fatalf("no probe brought forward by the up event: %s", e.describe(qa, qb))
	}
	// B saw no up event (only A's NIC went down): its sends come back after its own back-off.
	waitFor(t, "both QPs back on the default NIC", func() bool { return allDefault(qa, qb) }, func() string { return e.describe(qa, qb) })
	t.Logf("link up → A's sends on the default NIC in %v, both QPs in %v", back, time.Since(start))
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 50, size: 512, failAt: -1, seed: 32})
}

// TestLinkUpAbandonsProbe: a probe goes out while the default link is down, on QPs whose ACK
// timeout is 268 ms (exponent 16, seven retries), and the link comes back while it waits.
// Its retransmission would bring the QPs back a timeout later; the up event gives it up
// instead (a reset round, the probe counted failed) and the next probe follows the round.
func TestLinkUpAbandonsProbe(t *testing.T) {
	e, qa, qb := upPair(t, verbs.ConnectAttr{Timeout: 16, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 1}, 33)
	ha := e.hosts[0]
	e.linkDown(0)
	waitFor(t, "a probe of host A in flight on the down link", func() bool {
		return qa.up.posted.Load() != 0 && qa.up.posted.Load() == qa.defGen.Load()+1
	}, func() string { return e.describe(qa, qb) })
	before := ha.ctx.Stats()
	e.linkUp(0)
	start := time.Now()
	pb := &poller{t: t, cq: e.hosts[1].cq}
	waitFor(t, "both QPs back on the default NIC", func() bool {
		if ws := pb.next(time.Now()); len(ws) != 0 {
			t.Fatalf("B polled %+v", ws)
		}
		return allDefault(qa, qb)
	}, func() string { return e.describe(qa, qb) })
	back := time.Since(start)
	sa := ha.ctx.Stats()
	if sa.LinkUpProbes == before.LinkUpProbes || sa.ProbeFailures == before.ProbeFailures || sa.ResetRounds == before.ResetRounds {
		t.Fatalf("the probe in flight was not given up: before %+v after %+v", before, sa)
	}
	t.Logf("link up → both QPs on the default NIC in %v; A: %d probes, %d failed, %d reset rounds since the up", back,
		sa.Probes-before.Probes, sa.ProbeFailures-before.ProbeFailures, sa.ResetRounds-before.ResetRounds)
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 50, size: 512, failAt: -1, seed: 34})
}

// upPair is a connected QP pair over emulated hosts whose link events reach SHIFT, with
// probes every 20 ms doubling up to an hour, the connection attributes attr, after a first
// stream of 20 SENDs (seed) on the default NICs.
func upPair(t *testing.T, attr verbs.ConnectAttr, seed uint64) (*testEnv, *QP, *QP) {
	t.Helper()
	e := newEnvCfg(t, 256, func(h int, o *Options) {
		o.ProbeInterval = 20 * time.Millisecond
		o.ProbeMaxInterval = time.Hour
	}, true)
	e.attr = attr
	a, b := e.pairs(t, 1, smallCap)
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 20, size: 512, failAt: -1, seed: seed})
	return e, a[0], b[0]
}
