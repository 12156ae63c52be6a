package failover

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestResetRoundLost: a reset round's notification, or its reply, is dropped by the peer (as
// deliver drops a message for a QP whose set is not connected to the sender's). Nothing of
// the application's waits on such a round, so before notifyresend.go the QP stayed in
// AwaitReset for good: it never probed again and never returned to its default NIC. Now the
// notification is sent again after HandshakeTimeout, the round ends, and the QPs return to
// the default NIC and carry a stream there.
//
// "late reply": the first reply is not lost but arrives after the notification was sent
// again, before the second reply. A resets on it and drops the second as a duplicate, so A
// counts one reset fewer than B: the two default QPs are one incarnation apart. The probe
// after SwitchToDefault must then fail without being executed, and its reset round bring
// the counts together, before both return to the default NIC.
func TestResetRoundLost(t *testing.T) {
	for _, lose := range []string{"notification", "reply", "late reply"} {
		t.Run(lose, func(t *testing.T) {
			e := newEnvWith(t, 256, func(h int, o *Options) {
				recoverOpts(h, o)
				o.HandshakeTimeout = 200 * time.Millisecond
			})
			a, b := e.pairs(t, 1, smallCap)
			desc := func() string { return e.describe(a[0], b[0]) }
			// On the backup on purpose (pinned: neither side probes), so that the only round
			// is the one started below.
			if err := a[0].SwitchToBackup(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "both QPs on the backup", func() bool { return allFallback(a[0], b[0]) }, desc)
			to, reply, keep := e.hosts[1].ctx, false, int32(1)
			if lose != "notification" {
				to, reply = e.hosts[0].ctx, true
			}
			if lose == "late reply" {
				keep = 2 // both replies are held, then delivered in their order
			}
			var (
				mu   sync.Mutex
				held []ctlMsg
				eps  []*ctlEndpoint
				n    atomic.Int32
			)
			hook := func(ep *ctlEndpoint, m ctlMsg) bool {
				if m.reply != reply || m.refused || n.Load() >= keep {
					return false
				}
				mu.Lock()
				held, eps = append(held, m), append(eps, ep)
				mu.Unlock()
				n.Add(1)
				return true
			}
			to.dropCtl.Store(&hook)
			t.Cleanup(func() { to.dropCtl.Store(nil) })
			// What a failed probe does on A (probeEnd): a reset round, nothing to repost.
			before := e.hosts[0].ctx.Stats()
			e.hosts[0].ctx.eng.do(func() { a[0].fallback(ctlMsg{}, false) })
			waitFor(t, "the messages held", func() bool { return n.Load() == keep }, desc)
			if lose == "late reply" {
				to.dropCtl.Store(nil)
				mu.Lock()
				eps[0].deliver(held[0]) // the first reply, late
				mu.Unlock()
				waitFor(t, "A's reset round over", func() bool { return a[0].mach.roundState() == RoundIdle }, desc)
				mu.Lock()
				eps[1].deliver(held[1]) // the second: a duplicate for A
				mu.Unlock()
				if held[1].gen != held[0].gen+1 {
					t.Fatalf("replies of incarnations %d and %d, want consecutive", held[0].gen, held[1].gen)
				}
			}
			waitFor(t, "A's reset round over", func() bool { return a[0].mach.roundState() == RoundIdle }, desc)
			sa := e.hosts[0].ctx.Stats()
			if sa.ResetRounds != before.ResetRounds+1 || sa.NotificationsResent == 0 {
				t.Fatalf("A's counters: before %+v after %+v", before, sa)
			}
			if lose == "late reply" {
				// Let the duplicate reach A's engine before the incarnations are compared.
				waitFor(t, "B's second reset", func() bool { return b[0].defGen.Load() == a[0].defGen.Load()+1 }, desc)
			}
			a[0].SwitchToDefault()
			waitFor(t, "both QPs back on the default NIC", func() bool { return allDefault(a[0], b[0]) }, desc)
			runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 100, size: 512, failAt: -1, seed: 61})
			if !allDefault(a[0], b[0]) || a[0].defGen.Load() != b[0].defGen.Load() {
				t.Fatalf("after the stream: %s", desc())
			}
			sa = e.hosts[0].ctx.Stats()
			if lose == "late reply" && sa.ProbeFailures == 0 {
				t.Fatalf("one incarnation apart, yet no probe failed: %+v", sa)
			}
			t.Logf("A: %d notifications sent again, %d probe failures; %s", sa.NotificationsResent, sa.ProbeFailures, desc())
		})
	}
}

// TestHandshakeMessageLost: in a fallback round under a stream, the first notification the
// peer receives is dropped (as deliver drops a message for a QP whose set is not connected to
// the sender's). Before, the sender's QP failed at HandshakeTimeout and the application saw
// errors; now the notification is sent once more halfway through (notifyresend.go) and the
// stream completes exactly once, in order, without an error. (A lost reply is not tested
// here: the answering side's drain queues a reset round of its own right after the round,
// whose notification ends the waiting side's round as a reply does; docs/FAILOVER.md "Reset
// rounds". TestResetRoundLost loses a reply where nothing else comes.)
func TestHandshakeMessageLost(t *testing.T) {
	e := newEnvWith(t, 256, func(h int, o *Options) {
		// No probe within the test: a failed probe's reset round would bring the peer's
		// notification, which ends a round as its reply does.
		o.ProbeInterval, o.ProbeMaxInterval = time.Minute, time.Minute
		o.HandshakeTimeout = 2 * time.Second
	})
	a, b := e.pairs(t, 1, smallCap)
	var dropped atomic.Int32
	hook := func(ep *ctlEndpoint, m ctlMsg) bool {
		return !m.reply && !m.refused && !m.neverSent && dropped.CompareAndSwap(0, 1)
	}
	for _, h := range e.hosts {
		h.ctx.dropCtl.Store(&hook)
		t.Cleanup(func() { h.ctx.dropCtl.Store(nil) })
	}
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 120, size: 512, failAt: 40, failHost: 0, seed: 71})
	if dropped.Load() != 1 {
		t.Fatalf("no notification was dropped: %s", e.describe(a[0], b[0]))
	}
	sa, sb := e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats()
	if sa.NotificationsResent+sb.NotificationsResent == 0 {
		t.Fatalf("nothing sent again: A %+v B %+v", sa, sb)
	}
	t.Logf("A %d, B %d notifications sent again; %s", sa.NotificationsResent, sb.NotificationsResent, e.describe(a[0], b[0]))
}
