package failover

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// BenchmarkNetnsLinkDownQPs is BenchmarkNetnsLinkDown with many QP pairs on the failing link,
// as a training job has (NCCL opens several per peer): host A's default veth goes down, then
// every pair posts one WRITE_WITH_IMM; measured are link down → the first and the last pair's
// message delivered on the backup. A link event falls back every QP of the context, one
// round after another on the engine (roundwait.go), so the last pair's time grows with their
// number; first-p50 is one pair's fallback among many, and notified-all-p50 host A's own
// sequence: its first QP's round began → its last QP's notification posted.
func BenchmarkNetnsLinkDownQPs(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) { benchLinkDownQPs(b, n) })
	}
}

func benchLinkDownQPs(b *testing.B, n int) {
	e := newNetnsEnvCfg(b, recoverOpts, true)
	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa, qb := e.pairs(b, n, cp)
	ha, hb := e.hosts[0], e.hosts[1]
	nl, link := defaultLinkHandle(b, e)
	const size = 256
	var first, last, notified []time.Duration
	sp, rp := &poller{t: b, cq: ha.cq}, &poller{t: b, cq: hb.cq}
	all := append(slices.Clone(qa), qb...)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, q := range qb {
			if err := q.PostRecv([]verbs.RecvWR{{WRID: uint64(k), SGL: []verbs.SGE{hb.mr.SGE(bufSize/2+k*64, 64)}}}); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		if err := nl.LinkSetDown(link); err != nil {
			b.Fatal(err)
		}
		for k, q := range qa {
			w := verbs.SendWR{WRID: uint64(k), Opcode: verbs.WRRDMAWriteWithImm, Imm: uint32(k), Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{ha.mr.SGE(k*size, size)}, RemoteAddr: hb.mr.Addr() + uint64(k*size), RKey: hb.mr.RKey()}
			if err := q.PostSend([]verbs.SendWR{w}); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		seen := make([]bool, n)
		for got := 0; got < n; {
			ws := rp.next(deadline)
			if len(ws) == 0 {
				b.Fatalf("down %d: %d of %d messages delivered; %s", i, got, n, e.describe(qa[0], qb[0]))
			}
			for _, w := range ws {
				if w.Status != verbs.WCSuccess || w.WRID >= uint64(n) || seen[w.WRID] || w.Imm != uint32(w.WRID) {
					b.Fatalf("down %d: receiver %+v", i, w)
				}
				seen[w.WRID] = true
				got++
				if got == 1 {
					first = append(first, time.Since(t0))
				}
			}
		}
		last = append(last, time.Since(t0))
		// A's own sequence: the first QP's round began → the last QP's notification posted.
		lo, hi := qa[0].tErr.Load(), qa[0].tPrep.Load()
		for _, q := range qa[1:] {
			lo, hi = min(lo, q.tErr.Load()), max(hi, q.tPrep.Load())
		}
		if lo > 0 && hi > lo {
			notified = append(notified, time.Duration(hi-lo))
		}
		for got := 0; got < n; {
			ws := sp.next(deadline)
			if len(ws) == 0 {
				b.Fatalf("down %d: %d of %d sends completed", i, got, n)
			}
			for _, w := range ws {
				if w.Status != verbs.WCSuccess {
					b.Fatalf("down %d: sender %+v", i, w)
				}
			}
			got += len(ws)
		}
		e.linkUp(0)
		waitFor(b, "every QP back on the default NIC", func() bool { return allDefault(all...) }, func() string { return e.describe(qa[0], qb[0]) })
	}
	b.StopTimer()
	pct := func(d []time.Duration, q float64) time.Duration {
		d = slices.Sorted(slices.Values(d))
		return d[min(len(d)-1, int(q*float64(len(d))))]
	}
	b.ReportMetric(float64(pct(first, 0.5).Microseconds()), "first-p50-µs")
	b.ReportMetric(float64(pct(last, 0.5).Microseconds()), "last-p50-µs")
	b.ReportMetric(float64(pct(last, 0.99).Microseconds()), "last-p99-µs")
	if len(notified) > 0 {
		b.ReportMetric(float64(pct(notified, 0.5).Microseconds()), "notified-all-p50-µs")
	}
	b.ReportMetric(0, "ns/op")
	b.Logf("%d pairs, %d downs: link down → first delivered p50 %v, last p50 %v p99 %v; A %+v", n, len(last), pct(first, 0.5), pct(last, 0.5), pct(last, 0.99), ha.ctx.Stats())
}
