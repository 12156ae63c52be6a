package failover

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Fallback latency as the paper measures it: from the first error completion polled on the
// default QP to the first successful completion of an application WR on the backup QP. One
// fresh pair of emulated hosts per iteration; run with -benchtime=Nx.
//
// The latency is split into SHIFT's own share and the wait for the emulator (fallbackSplit):
// own-p50 is SHIFT's critical path on both sides, busy-p50 all the time both spent in their
// rounds; wait-p50 is the latency less own (the drains' wait for flushes, the notification
// and the reply in flight, the reposted WRs executing and being polled). own-prep,
// own-answer and own-repost are own's three parts (ownParts); own-less-posts is own less the
// time inside the provider's posts of the round's messages and reposts: a doorbell on a
// parked emulated NIC yields to it (mlx5.UARWaker), and the NIC's pass, the in-process
// fabric's delivery included, runs on the poster's processor, which a real NIC does not cost
// the writer of a doorbell (313 µs p50 inside the notification's post, 30 fallbacks, in a
// temporary trace of 2026-11-29; as BenchmarkNetnsLinkDown). own-less-device is
// own-less-posts less the time inside the device command of the round, the default QP's move
// to ERR, which the emulated kernel passes to the emulated NIC, which flushes the QP on the
// caller's processor (14–39 µs p50 for the peer's in two temporary traces of 2026-11-30).
// The peer's share ends at its reply, and so does its part of those posts (tPostPrep).
// own-first-less-device is own-less-device up to the first WR reposted on the backup
// instead of the last (tFirst): what stands between the error and the first backup
// success; the later reposts run while the backup NIC executes the first.
//
// Two depths: 64 messages with the failure at the 32nd, and 16 with it at the 8th (fewer WQEs
// in the default ring at the error), which separates the round's fixed cost from its cost
// per outstanding WQE. Each fallback is the first of a fresh QP in a fresh emulator, its code
// and data cold after the emulator ran on the same processors, as at a real failure after
// hours of traffic; BenchmarkNetnsLinkDown's fifty downs on one pair run warm.
func BenchmarkFallbackLatency(b *testing.B) {
	type depth struct{ msgs, failAt int }
	for _, mode := range []streamMode{modeWrite, modeSend} {
		for _, d := range []depth{{64, 32}, {16, 8}} {
			b.Run(fmt.Sprintf("%v/msgs=%d", mode, d.msgs), func(b *testing.B) { benchFallback(b, mode, d.msgs, d.failAt) })
		}
	}
}

// benchFallback is one of BenchmarkFallbackLatency's runs: streams of msgs messages of mode,
// the default link failing after the failAt-th.
func benchFallback(b *testing.B, mode streamMode, msgs, failAt int) {
	var lat, prep, hs, first, own, ownNet, ownDev, ownFirst, busy, wait, notify, reply, oPrep, oAnswer, oRepost []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		func() {
			e := newEnv(b, 256)
			a, bq := e.pairs(b, 1, smallCap)
			runStreamTB(b, e, a[0], bq[0], stream{mode: mode, msgs: msgs, size: 4096, failAt: failAt, failHost: 0, seed: uint64(i)})
			if l := a[0].FallbackLatency(); l > 0 {
				lat = append(lat, l)
				p, h, c := a[0].FallbackPhases()
				prep, hs, first = append(prep, p), append(hs, h), append(first, c)
				if o, u, n, r, ok := fallbackSplit(a[0], bq[0]); ok {
					own, busy, wait = append(own, o), append(busy, u), append(wait, l-o)
					notify, reply = append(notify, n), append(reply, r)
					posts := time.Duration(a[0].tPost.Load() + bq[0].tPostPrep.Load())
					cmds := time.Duration(a[0].tCmd.Load() + bq[0].tCmd.Load())
					ownNet = append(ownNet, o-posts)
					ownDev = append(ownDev, o-posts-cmds)
					if f := a[0].tFirst.Load(); f != 0 {
						// own less the reposts after the first, and their device time
						toFirst := o - time.Duration(a[0].tPosted.Load()-f)
						ownFirst = append(ownFirst, toFirst-time.Duration(a[0].tPostFirst.Load()+bq[0].tPostPrep.Load())-cmds)
					}
					op, oa, or := ownParts(a[0], bq[0])
					oPrep, oAnswer, oRepost = append(oPrep, op), append(oAnswer, oa), append(oRepost, or)
				}
			}
		}()
	}
	if len(lat) == 0 {
		b.Fatal("no fallback measured")
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(float64(med(prep).Microseconds()), "prepare-p50-µs")
	b.ReportMetric(float64(med(hs).Microseconds()), "handshake-p50-µs")
	b.ReportMetric(float64(med(first).Microseconds()), "first-wc-p50-µs")
	if len(own) > 0 {
		b.ReportMetric(float64(med(own).Microseconds()), "own-p50-µs")
		b.ReportMetric(float64(med(ownNet).Microseconds()), "own-less-posts-p50-µs")
		b.ReportMetric(float64(med(ownDev).Microseconds()), "own-less-device-p50-µs")
		if len(ownFirst) > 0 {
			b.ReportMetric(float64(med(ownFirst).Microseconds()), "own-first-less-device-p50-µs")
		}
		b.ReportMetric(float64(med(oPrep).Microseconds()), "own-prep-p50-µs")
		b.ReportMetric(float64(med(oAnswer).Microseconds()), "own-answer-p50-µs")
		b.ReportMetric(float64(med(oRepost).Microseconds()), "own-repost-p50-µs")
		b.ReportMetric(float64(med(busy).Microseconds()), "busy-p50-µs")
		b.ReportMetric(float64(med(wait).Microseconds()), "wait-p50-µs")
		b.ReportMetric(float64(med(notify).Microseconds()), "notify-p50-µs")
		b.ReportMetric(float64(med(reply).Microseconds()), "reply-p50-µs")
		b.Logf("%v: %d of %d fallbacks split into SHIFT's own share and the wait", mode, len(own), len(lat))
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(float64(p(0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(p(0.99).Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
	b.Logf("%v: %d fallbacks, median %v, p99 %v, min %v, max %v", mode, len(lat), p(0.5), p(0.99), lat[0], lat[len(lat)-1])
}

// fallbackSplit splits a's last fallback (a's error or link event started it, peer replied)
// into SHIFT's own share and the wait for the emulator and the peer. own is the critical
// path inside SHIFT: a's round until its notification is posted (and what of its decoding
// after it ran past the peer's reply: keptLate), the peer's from the poll of
// that notification until its reply is posted, a's from the poll of the reply until the last
// WR is reposted, less the drains' wait for the default NICs' flushes. busy is all the time
// both QPs spent in their rounds (less the drains' wait), including what follows the posts
// (the default QPs' reset). notify and reply are the messages in flight: posted → polled by
// the other side (the emulator delivering it and the poller waking up). ok is false when
// the timestamps do not describe that order (both sides notified at once, a round missing).
func fallbackSplit(a, peer *QP) (own, busy, notify, reply time.Duration, ok bool) {
	aErr, aPrep, aCtl, aRepost, aPosted := a.tErr.Load(), a.tPrep.Load(), a.tCtl.Load(), a.tRepost.Load(), a.tPosted.Load()
	pCtl, pEnter, pPrep := peer.tCtl.Load(), peer.tErr.Load(), peer.tPrep.Load()
	if !(aErr != 0 && aErr <= aPrep && aPrep <= pCtl && pCtl <= pEnter && pEnter <= pPrep && pPrep <= aCtl && aCtl <= aRepost && aRepost <= aPosted) {
		return 0, 0, 0, 0, false
	}
	drains := a.tDrain.Load() + peer.tDrain.Load()
	own = time.Duration((aPrep - aErr) + (pPrep - pCtl) + (aPosted - aCtl) - drains + keptLate(a, peer))
	busy = time.Duration(a.tBusy.Load() + peer.tBusy.Load() - drains)
	return own, busy, time.Duration(pCtl - aPrep), time.Duration(aCtl - pPrep), true
}

// keptLate is the part of a's decoding of its ring for the repost, which its round does after
// the notification is posted (prepareLocked), that ran after the peer posted its reply: from
// then on it may have held the reply's round back, so SHIFT's own share counts it (with
// a's round until its notification, in ownParts). The part before overlaps the notification
// and the reply in flight.
func keptLate(a, peer *QP) int64 {
	if k := a.tKept.Load(); k != 0 {
		return max(0, k-peer.tPrep.Load())
	}
	return 0
}

// ownParts splits fallbackSplit's own share into its three parts: a's round until its
// notification is posted (less its drain's wait), the peer's from the poll of that
// notification until its reply is posted (less its drain's wait), and a's from the poll of
// the reply until the last WR is reposted. Call it only where fallbackSplit reported ok.
func ownParts(a, peer *QP) (prep, answer, repost time.Duration) {
	prep = time.Duration(a.tPrep.Load() - a.tErr.Load() - a.tDrain.Load() + keptLate(a, peer))
	answer = time.Duration(peer.tPrep.Load() - peer.tCtl.Load() - peer.tDrain.Load())
	repost = time.Duration(a.tPosted.Load() - a.tCtl.Load())
	return prep, answer, repost
}

// Shadow setup cost: the time the application's control verbs take (default device only) and
// the time until the backup goroutines have replayed them (backup objects created, KV entries
// published, backup QPs connected), for 1, 100 and 1000 QP pairs across two hosts.
func BenchmarkShadowSetup(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				e := newEnv(b, 64)
				const perCtx = 14
				cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
				var hosts [2][]*testHost
				for g := 0; g < (n+perCtx-1)/perCtx; g++ {
					hosts[0] = append(hosts[0], e.openHost(b, 0, 64, 4096))
					hosts[1] = append(hosts[1], e.openHost(b, 1, 64, 4096))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
				for h := range 2 {
					for _, c := range hosts[h] {
						if err := c.ctx.WaitShadow(ctx); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StartTimer()
				t0 := time.Now()
				for q := range n {
					e.connect(b, hosts[0][q/perCtx], hosts[1][q/perCtx], cp, uint32(q))
				}
				app := time.Since(t0)
				for h := range 2 {
					for _, c := range hosts[h] {
						if err := c.ctx.WaitShadow(ctx); err != nil {
							b.Fatal(err)
						}
					}
				}
				all := time.Since(t0)
				b.StopTimer()
				cancel()
				b.ReportMetric(float64(app.Microseconds())/float64(n), "app-µs/pair")
				b.ReportMetric(float64(all.Microseconds())/float64(n), "shadowed-µs/pair")
				b.Logf("%d QP pairs: default verbs %v, until every shadow replayed %v", n, app, all)
			}
		})
	}
}

// The same connections with the plain provider on the same kind of contexts: the baseline of
// BenchmarkShadowSetup.
func BenchmarkProviderSetup(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				e := newEnv(b, 64)
				const perCtx = 14
				cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
				var hosts [2][]*testHost
				for g := 0; g < (n+perCtx-1)/perCtx; g++ {
					hosts[0] = append(hosts[0], e.openHost(b, 0, 64, 4096))
					hosts[1] = append(hosts[1], e.openHost(b, 1, 64, 4096))
				}
				b.StartTimer()
				t0 := time.Now()
				for q := range n {
					ha, hb := hosts[0][q/perCtx], hosts[1][q/perCtx]
					qa, err := ha.pd.Default().CreateQP(verbs.QPInitAttr{SendCQ: ha.cq.Default(), RecvCQ: ha.cq.Default(), Cap: cp})
					if err != nil {
						b.Fatal(err)
					}
					qb, err := hb.pd.Default().CreateQP(verbs.QPInitAttr{SendCQ: hb.cq.Default(), RecvCQ: hb.cq.Default(), Cap: cp})
					if err != nil {
						b.Fatal(err)
					}
					ea := verbs.Endpoint{QPN: qa.QPN(), PSN: 1, GID: ha.gid}
					eb := verbs.Endpoint{QPN: qb.QPN(), PSN: 2, GID: hb.gid}
					if err := verbs.Connect(qa, e.attr, ea, eb); err != nil {
						b.Fatal(err)
					}
					if err := verbs.Connect(qb, e.attr, eb, ea); err != nil {
						b.Fatal(err)
					}
				}
				all := time.Since(t0)
				b.StopTimer()
				b.ReportMetric(float64(all.Microseconds())/float64(n), "µs/pair")
			}
		})
	}
}

// pokeYield is the time doorbells written on the hosts' first backup NICs spent yielding to
// the emulated NIC they woke (nic.Stats.PokeYield): in a fallback round those are SHIFT's
// own notification, reply and reposts, and the emulated NIC's work run in the yields is
// counted in SHIFT's share (fallbackSplit), which on hardware it is not.
func (e *testEnv) pokeYield() time.Duration {
	nics := e.bkNICs
	if e.cl != nil {
		nics = nil
		for _, h := range e.cl.Hosts {
			nics = append(nics, h.Devices[1].NIC())
		}
	}
	var d time.Duration
	for _, n := range nics {
		d += n.Stats().PokeYield
	}
	return d
}
