package failover

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/provider/verbs"
)

// newNetnsEnv puts each emulated host in its own network namespace with two rails (two veth
// pairs): NIC 0 of both hosts on the first, NIC 1 on the second. The NICs exchange real
// RoCEv2 datagrams (UDP 4791) through the kernel, and the default NIC fails with a real
// `ip link set down` of its veth. It skips where namespaces cannot be created.
func newNetnsEnv(t *testing.T) *testEnv { return newNetnsEnvWith(t, nil) }

// newNetnsEnvWith is newNetnsEnv with a hook that adjusts each host's Options.
func newNetnsEnvWith(t *testing.T, hook func(h int, o *Options)) *testEnv {
	t.Helper()
	return newNetnsEnvCfg(t, hook, false)
}

// newNetnsEnvCfg is newNetnsEnvWith; with links each context watches its default veth with a
// probe.Watcher inside the host's namespace (Options.WatchLink).
func newNetnsEnvCfg(t testing.TB, hook func(h int, o *Options), links bool) *testEnv {
	t.Helper()
	nsA, nsB := netnstest.New(t), netnstest.New(t)
	seq := envSeq.Add(1)
	prefix := fmt.Sprintf("fons%d_%d_", os.Getpid(), seq)
	subnet := 100 + int(seq%60)*2
	var rails [2][2]*netnstest.Veth // [nic][host]
	var bkNICs []*nic.Device
	for nic := range 2 {
		va, vb := netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{
			Addrs: [2]netip.Prefix{
				netip.MustParsePrefix(fmt.Sprintf("10.%d.0.1/24", subnet+nic)),
				netip.MustParsePrefix(fmt.Sprintf("10.%d.0.2/24", subnet+nic)),
			},
			StaticNeighbors: true, MTU: 9000,
		})
		rails[nic] = [2]*netnstest.Veth{va, vb}
	}
	for h := range 2 {
		for nic := range 2 {
			v := rails[nic][h]
			var link *fabric.UDPLink
			if err := v.NS.Do(func() (err error) {
				link, err = fabric.ListenUDP(v.Addr.Addr())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s%d", prefix, 2*h+nic)
			d, err := emu.NewDevice(emu.DeviceConfig{Name: name, Ports: []emu.PortConfig{{Link: link, Netdev: v.Name, NetdevMTU: 9000}}})
			if err != nil {
				link.Close()
				t.Fatal(err)
			}
			un, err := d.Register()
			if err != nil {
				d.Close()
				link.Close()
				t.Fatal(err)
			}
			if nic == 1 {
				bkNICs = append(bkNICs, d.NIC())
			}
			t.Cleanup(func() {
				un()
				if err := d.Close(); err != nil {
					t.Errorf("close %s: %v", name, err)
				}
				link.Close()
			})
		}
	}
	e := &testEnv{kv: kv.NewMem(), attr: netnsAttr, prefix: prefix, job: fmt.Sprintf("nsjob%d", seq), hook: hook,
		links: links, linkNS: [2]string{"/var/run/netns/" + nsA.Name, "/var/run/netns/" + nsB.Name}, bkNICs: bkNICs}
	e.rails = rails
	e.down = func(h int) { rails[0][h].SetUp(t, false) }
	e.up = func(h int) { rails[0][h].SetUp(t, true) }
	for h := range 2 {
		e.hosts[h] = e.openHost(t, h, 2048, bufSize)
	}
	return e
}

func TestNetnsRoCEv2Fallback(t *testing.T) {
	for _, mode := range []streamMode{modeWrite, modeSend, modeRead} {
		for _, side := range []int{0, 1} {
			t.Run(fmt.Sprintf("%v/ip-link-down-host%d", mode, side), func(t *testing.T) {
				e := newNetnsEnv(t)
				a, b := e.pairs(t, 1, smallCap)
				runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 200, size: 4096, failAt: 100, failHost: side, seed: uint64(50 + side)})
				if st := a[0].SendState(); st != SendFallback {
					t.Fatalf("sender state %v, want Fallback (err %v)", st, a[0].Err())
				}
				t.Logf("fallback latency %v", a[0].FallbackLatency())
			})
		}
	}
}

// TestNetnsRoCEv2Flapping: the default rail's veth of one host goes down and up (ip link set)
// repeatedly under a stream over real RoCEv2; every message arrives once, in order, and the
// QPs come back to the default NICs after each cycle.
// netnsAttr is fastAttr with the retry reach of perftest's defaults (timeout 14, 7 retries:
// about 0.5 s): the RoCEv2 packets of the netns tier cross real veths and UDP sockets, and on
// a loaded 2-core machine a healthy backup path stalled past fastAttr's 67 ms often enough
// (about one run in 15) to exhaust its retries and fail a flapping stream.
var netnsAttr = verbs.ConnectAttr{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 1}

func TestNetnsRoCEv2Flapping(t *testing.T) {
	for _, mode := range []streamMode{modeWrite, modeSend} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newNetnsEnvWith(t, recoverOpts)
			flapUnderStreams(t, e, mode, 4)
		})
	}
}

// defaultLinkHandle opens a netlink socket inside host A's namespace, once, so that taking
// its default veth down is one request, and returns it with that veth.
func defaultLinkHandle(b *testing.B, e *testEnv) (*netlink.Handle, netlink.Link) {
	v := e.rails[0][0]
	nsh, err := netns.GetFromName(v.NS.Name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nsh.Close() })
	nl, err := netlink.NewHandleAt(nsh)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nl.Close)
	link, err := nl.LinkByIndex(v.Index)
	if err != nil {
		b.Fatal(err)
	}
	return nl, link
}

// BenchmarkNetnsLinkDown: link down → traffic resumed on the backup over RoCEv2 between
// namespaces, with the link watcher (Options.WatchLink) on host A's default veth. Each
// iteration is one down: host A's default veth goes down (netlink, from this process: the
// kernel's change lies between the two timestamps around the call, 235–293 µs apart at the p50
// in three runs of 2026-11-28), A posts unsignaled WRITEs and a signaled WRITE_WITH_IMM
// without polling, and the time is taken when B polls the WRITE_WITH_IMM's completion (its
// data checked); then the veth comes up and both QPs return to the default NICs before the
// next down. Root; run with -benchtime=50x (one down takes about 50 ms, mostly the recovery).
//
// Reported: p50/p99 of link down → delivered on the backup; p50 of link down → A's fallback
// round started (detection), both counted from the start of the netlink request that takes the
// link down (its return may come after the watcher saw the down: counted from there, detection
// p50 came out at −2.7 µs in a run of 2026-11-28), with the request's own p50 (netlink-p50);
// and of that round's SHIFT share and the transit of the notification and reply
// (fallbackSplit), with the share's three parts (ownParts: own-prep, own-answer, own-repost),
// and the share less the time inside the provider's posts of the round's messages and
// reposts (own-less-posts: there a doorbell on a parked emulated NIC yields to it, and the
// NIC's pass with its UDP send runs on the poster's processor, which a real NIC does not
// cost the writer of a doorbell; poke-p50: all the yields of doorbells on the backup NICs
// during the down, the application's posts there included, pokeYield), and less the time
// inside the round's device commands too (own-less-device: the default QPs' moves to ERR,
// where the emulated NIC flushes the QP on the caller's processor); drain-p50: the two
// drains' waits for the default NICs' completions (left out of the share);
// deliver-p50 is the last segment, A's last WR reposted on the backup → the
// receiver's poll of the WRITE_WITH_IMM (the backup NICs executing, carrying and completing
// the reposted WRs, and the poll).
func BenchmarkNetnsLinkDown(b *testing.B) {
	e := newNetnsEnvCfg(b, recoverOpts, true)
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	a, bq := e.pairs(b, 1, cp)
	qa, qb := a[0], bq[0]
	ha, hb := e.hosts[0], e.hosts[1]
	runStreamTB(b, e, qa, qb, stream{mode: modeWrite, msgs: 20, size: 512, failAt: -1, seed: 21})
	nl, link := defaultLinkHandle(b, e)
	const n, size = 8, 256
	var lat, detect, req, own, busy, notify, reply, deliver, ownPrep, ownAnswer, ownRepost, poke, ownNet, ownDev, drain, upBack, upSend []time.Duration
	sp := &poller{t: b, cq: ha.cq}
	rp := &poller{t: b, cq: hb.cq}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: 77, SGL: []verbs.SGE{hb.mr.SGE(bufSize/2, 64)}}}); err != nil {
			b.Fatal(err)
		}
		clear(hb.buf.Bytes()[:n*size])
		payload(ha.buf.Bytes()[:n*size], 22, uint64(i))
		wrs := make([]verbs.SendWR, n)
		for w := range wrs {
			wrs[w] = verbs.SendWR{WRID: uint64(100 + w), Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(w*size, size)},
				RemoteAddr: hb.mr.Addr() + uint64(w*size), RKey: hb.mr.RKey()}
		}
		wrs[n-1].Opcode, wrs[n-1].Imm, wrs[n-1].Flags = verbs.WRRDMAWriteWithImm, 7, verbs.SendSignaled
		poke0 := e.pokeYield()
		t0 := time.Now()
		if err := nl.LinkSetDown(link); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := qa.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		ws := rp.next(time.Now().Add(20 * time.Second))
		got := time.Now()
		if len(ws) != 1 || ws[0].WRID != 77 || ws[0].Status != verbs.WCSuccess || ws[0].Imm != 7 {
			b.Fatalf("down %d: receiver %+v; %s", i, ws, e.describe(qa, qb))
		}
		if !bytes.Equal(hb.buf.Bytes()[:n*size], ha.buf.Bytes()[:n*size]) {
			b.Fatalf("down %d: the WRITEs' data is not in place at the WRITE_WITH_IMM", i)
		}
		if t1.Sub(t0) > time.Millisecond {
			b.Logf("down %d: the netlink request took %v", i, t1.Sub(t0))
		}
		lat = append(lat, got.Sub(t0))
		detect = append(detect, time.Duration(qa.tErr.Load()-t0.UnixNano()))
		req = append(req, t1.Sub(t0))
		if o, u, nt, r, ok := fallbackSplit(qa, qb); ok {
			own, busy, notify, reply = append(own, o), append(busy, u), append(notify, nt), append(reply, r)
			poke = append(poke, e.pokeYield()-poke0)
			posts := time.Duration(qa.tPost.Load() + qb.tPostPrep.Load()) // the peer's share ends at its reply
			ownNet = append(ownNet, o-posts)
			ownDev = append(ownDev, o-posts-time.Duration(qa.tCmd.Load()+qb.tCmd.Load()))
			drain = append(drain, time.Duration(qa.tDrain.Load()+qb.tDrain.Load()))
			pr, an, rp := ownParts(qa, qb)
			ownPrep, ownAnswer, ownRepost = append(ownPrep, pr), append(ownAnswer, an), append(ownRepost, rp)
			if p := qa.tPosted.Load(); p > t1.UnixNano() && p < got.UnixNano() {
				deliver = append(deliver, time.Duration(got.UnixNano()-p))
			}
		}
		if ws := sp.next(time.Now().Add(20 * time.Second)); len(ws) != 1 || ws[0].WRID != 100+n-1 || ws[0].Status != verbs.WCSuccess {
			b.Fatalf("down %d: sender %+v; %s", i, ws, e.describe(qa, qb))
		}
		// Up through the same netlink handle as the down, timed from the request's start:
		// e.linkUp runs two `ip` commands (27–34 ms here), the second to restore the
		// static neighbour entry the down flushed (ARP finds the peer meanwhile). It runs
		// after the wait, for the next down.
		upAt := time.Now()
		var sendsBack time.Duration
		if err := nl.LinkSetUp(link); err != nil {
			b.Fatal(err)
		}
		waitFor(b, "both QPs back on the default NIC", func() bool {
			if sendsBack == 0 && qa.SendState() == SendDefault {
				sendsBack = time.Since(upAt)
			}
			return allDefault(qa, qb)
		}, func() string { return e.describe(qa, qb) })
		upBack = append(upBack, time.Since(upAt)) // waitFor looks every millisecond
		upSend = append(upSend, sendsBack)        // set by the last look at the latest
		e.linkUp(0)
	}
	b.StopTimer()
	pct := func(d []time.Duration, q float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		d = slices.Sorted(slices.Values(d))
		return d[min(len(d)-1, int(q*float64(len(d))))]
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(pct(lat, 0.5)), "p50-µs")
	b.ReportMetric(us(pct(lat, 0.99)), "p99-µs")
	b.ReportMetric(us(pct(detect, 0.5)), "detect-p50-µs")
	b.ReportMetric(us(pct(req, 0.5)), "netlink-p50-µs")
	b.ReportMetric(us(pct(own, 0.5)), "own-p50-µs")
	b.ReportMetric(us(pct(ownNet, 0.5)), "own-less-posts-p50-µs")
	b.ReportMetric(us(pct(ownDev, 0.5)), "own-less-device-p50-µs")
	b.ReportMetric(us(pct(poke, 0.5)), "poke-p50-µs")
	b.ReportMetric(us(pct(busy, 0.5)), "busy-p50-µs")
	b.ReportMetric(us(pct(drain, 0.5)), "drain-p50-µs")
	b.ReportMetric(us(pct(ownPrep, 0.5)), "own-prep-p50-µs")
	b.ReportMetric(us(pct(ownAnswer, 0.5)), "own-answer-p50-µs")
	b.ReportMetric(us(pct(ownRepost, 0.5)), "own-repost-p50-µs")
	b.ReportMetric(us(pct(notify, 0.5)), "notify-p50-µs")
	b.ReportMetric(us(pct(reply, 0.5)), "reply-p50-µs")
	b.ReportMetric(us(pct(deliver, 0.5)), "deliver-p50-µs")
	b.ReportMetric(us(pct(upBack, 0.5)), "up-default-p50-µs")
	b.ReportMetric(us(pct(upSend, 0.5)), "up-sends-p50-µs")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d downs: link down → delivered on the backup p50 %v, p99 %v, min %v, max %v; detection p50 %v; netlink request p50 %v; %d rounds split: own p50 %v (less the posts %v; the backup NICs' poke yields %v), busy %v, notification %v, reply %v, reposted → delivered %v; link up → both QPs on the default NIC p50 %v, p99 %v, A's sends p50 %v; A %+v",
		len(lat), pct(lat, 0.5), pct(lat, 0.99), pct(lat, 0), pct(lat, 1), pct(detect, 0.5), pct(req, 0.5), len(own), pct(own, 0.5), pct(ownNet, 0.5), pct(poke, 0.5), pct(busy, 0.5), pct(notify, 0.5), pct(reply, 0.5), pct(deliver, 0.5), pct(upBack, 0.5), pct(upBack, 0.99), pct(upSend, 0.5), ha.ctx.Stats())
}
