package failover

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/rc"
	"github.com/shift-rdma/shift/provider/verbs"
)

// recoverOpts makes probing quick for the tests (the defaults are 100 ms and 2 s).
func recoverOpts(h int, o *Options) {
	o.ProbeInterval = 10 * time.Millisecond
	o.ProbeMaxInterval = 80 * time.Millisecond
}

// linkUp puts host h's default NIC back on the fabric.
func (e *testEnv) linkUp(h int) {
	if e.up != nil {
		e.up(h)
		return
	}
	e.cl.Endpoint(h, 0, 1).SetLinkUp(true)
}

func (e *testEnv) describe(a, b *QP) string {
	return fmt.Sprintf("A %v/%v round %v probing %v gen %d def %v B %v/%v round %v probing %v gen %d def %v; stats A %+v B %+v%s",
		a.SendState(), a.RecvState(), a.RoundState(), a.isProbing(), a.defGen.Load(), a.Default().State(),
		b.SendState(), b.RecvState(), b.RoundState(), b.isProbing(), b.defGen.Load(), b.Default().State(),
		e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats(), e.wire(a, b))
}

func (q *QP) isProbing() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mach.probeState() == ProbeRunning
}

// wire describes the transport counters of the default QPs of a (host 0) and b (host 1)
// since their last reset, on the in-process emulator.
func (e *testEnv) wire(a, b *QP) string {
	if e.cl == nil {
		return ""
	}
	s := ""
	for h, q := range []*QP{a, b} {
		nq := e.cl.Hosts[h].Devices[0].NIC().QP(q.QPN())
		if nq == nil {
			continue
		}
		if r, ok := nq.Transport().(*rc.QP); ok {
			s += fmt.Sprintf("; wire %c %+v %s", 'A'+h, r.Stats(), nq.Describe())
		}
	}
	return s
}

func allDefault(qs ...*QP) bool {
	for _, q := range qs {
		if q.SendState() != SendDefault || q.RecvState() != RecvDefault {
			return false
		}
	}
	return true
}

func allFallback(qs ...*QP) bool {
	for _, q := range qs {
		if q.SendState() != SendFallback || q.RecvState() != RecvFallback {
			return false
		}
	}
	return true
}

// waitFor polls cond with a generous guard (a failure guard, not a timing assertion).
func waitFor(t testing.TB, what string, cond func() bool, desc func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, desc())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRecoverAfterFallback: a stream falls back, the link comes back, both directions
// return to Default (the receiver's sends never post a signaled WR: SHIFT fences them), and
// a second stream runs on the default NICs.
func TestRecoverAfterFallback(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	for _, mode := range []streamMode{modeWrite, modeSend} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnvWith(t, 256, recoverOpts)
			a, b := e.pairs(t, 1, cp)
			runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 200, size: 2048, failAt: 60, failHost: 1, seed: 41})
			if !allFallback(a[0], b[0]) {
				t.Fatalf("states after the failure: A %v/%v B %v/%v", a[0].SendState(), a[0].RecvState(), b[0].SendState(), b[0].RecvState())
			}
			e.linkUp(1)
			waitFor(t, "both QPs back to Default", func() bool { return allDefault(a[0], b[0]) }, func() string { return e.describe(a[0], b[0]) })
			bk0 := e.hosts[0].ctx.Stats()
			runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 200, size: 2048, failAt: -1, seed: 42})
			if !allDefault(a[0], b[0]) {
				t.Fatal("left Default without a failure")
			}
			sa, sb := e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats()
			// Every fallback ended in a recovery, or in a later fallback that cut its recovery
			// short: a probe sent into the down link can run out of retries just after the
			// link came back, while the peer's probe went through and its recovery began; the
			// failed probe's reset round takes the peer's sends off the default path again.
			// Each fallback past the failure's one is such a round's, and each round a failed
			// probe's.
			probeFails := sa.ProbeFailures + sb.ProbeFailures
			for _, s := range []struct {
				name string
				st   Stats
				q    *QP
			}{{"A", sa, a[0]}, {"B", sb, b[0]}} {
				cut := s.q.SendTransitions(SendWaitDrained, SendHandshake) + s.q.SendTransitions(SendWaitSignaled, SendHandshake)
				if s.st.Recoveries < 1 || s.st.RecvRecoveries < 1 || s.st.Recoveries+cut != s.st.Fallbacks ||
					s.st.Fallbacks > 1+probeFails {
					t.Fatalf("recovery counters of %s (%d recoveries cut short): A %+v B %+v", s.name, cut, sa, sb)
				}
			}
			if sb.ShiftFences < 1 {
				t.Fatalf("B sent no fence: %+v", sb)
			}
			if sa.Reposted != bk0.Reposted || a[0].SendTransitions(SendWaitDrained, SendDefault) != sa.Recoveries {
				t.Fatalf("second stream did not run on the default path: %+v", sa)
			}
			t.Logf("switch-back %v, stall %v; A %+v", a[0].SwitchBackLatency(), a[0].RecoveryStall(), sa)
		})
	}
}

// flapper takes host h's default link down once the QPs are all Default and up once they
// all fell back, for cycles cycles, with seeded up and down periods.
type flapper struct {
	e      *testEnv
	qs     []*QP
	host   int
	cycles int
	rng    *rand.Rand
	done   chan struct{}
	err    error
	count  int
	// cycles done so far, for readers while run goes on (count is run's own)
	cycle atomic.Int64
	// switch-back times and stalls of the sender's recoveries, one per cycle
	switchBack, stall []time.Duration
}

func (f *flapper) run(stop <-chan struct{}) {
	defer close(f.done)
	wait := func(cond func() bool) bool {
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			select {
			case <-stop:
				return false
			case <-time.After(500 * time.Microsecond):
			}
			if time.Now().After(deadline) {
				f.err = fmt.Errorf("cycle %d: states did not converge", f.count)
				return false
			}
		}
		return true
	}
	sleep := func(lo, hi int) bool {
		d := time.Duration(lo+f.rng.IntN(hi-lo+1)) * time.Millisecond
		select {
		case <-stop:
			return false
		case <-time.After(d):
			return true
		}
	}
	for {
		if !wait(func() bool { return allDefault(f.qs...) }) {
			return
		}
		if f.count > 0 {
			f.switchBack = append(f.switchBack, f.qs[0].SwitchBackLatency())
			f.stall = append(f.stall, f.qs[0].RecoveryStall())
		}
		if f.count == f.cycles || !sleep(5, 60) {
			return
		}
		f.e.linkDown(f.host)
		if !wait(func() bool { return allFallback(f.qs...) }) || !sleep(50, 250) {
			f.e.linkUp(f.host)
			return
		}
		f.e.linkUp(f.host)
		f.count++
		f.cycle.Store(int64(f.count))
	}
}

// TestFlapping: the default link of one host goes down and up repeatedly under a stream;
// every message arrives exactly once, in order, with its data (runStream's checks), and the
// application sees no error. 2 switch-overs per cycle.
func TestFlapping(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	var switches, stalls []time.Duration
	var mu sync.Mutex
	total := 0
	for _, mode := range []streamMode{modeWrite, modeSend} {
		t.Run(mode.String(), func(t *testing.T) {
			seed := testSeed()
			t.Logf("seed %d (SHIFT_TEST_SEED reruns it)", seed)
			defer func() {
				if t.Failed() {
					t.Logf("failed with seed %d", seed)
				}
			}()
			e := newEnvWith(t, 256, recoverOpts)
			a, b := e.pairs(t, 1, cp)
			f := &flapper{e: e, qs: []*QP{a[0], b[0]}, host: int(seed % 2), cycles: 16,
				rng: rand.New(rand.NewPCG(seed, 1)), done: make(chan struct{})}
			stop := make(chan struct{})
			go f.run(stop)
			defer func() {
				close(stop)
				<-f.done
			}()
			for round := 0; ; round++ {
				select {
				case <-f.done:
				default:
					runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 240, size: 1024, failAt: -1, seed: seed + uint64(round)})
					continue
				}
				break
			}
			if f.err != nil {
				t.Fatal(f.err)
			}
			sa := e.hosts[0].ctx.Stats()
			// A probe racing the peer's reset can make one more fallback and recovery.
			if sa.Fallbacks < uint64(f.cycles) || sa.Recoveries < uint64(f.cycles) {
				t.Fatalf("%d cycles but %d fallbacks and %d recoveries", f.cycles, sa.Fallbacks, sa.Recoveries)
			}
			t.Logf("%d cycles; switch-back median %v p99 %v; stall median %v p99 %v; A %+v", f.count,
				percentile(f.switchBack, 0.5), percentile(f.switchBack, 0.99), percentile(f.stall, 0.5), percentile(f.stall, 0.99), sa)
			mu.Lock()
			switches = append(switches, f.switchBack...)
			stalls = append(stalls, f.stall...)
			total += int(sa.Fallbacks + sa.Recoveries)
			mu.Unlock()
		})
	}
	t.Logf("%d switch-overs in total; switch-back median %v p99 %v; stall median %v p99 %v (%d recoveries)", total,
		percentile(switches, 0.5), percentile(switches, 0.99), percentile(stalls, 0.5), percentile(stalls, 0.99), len(switches))
	if total < 60 && !t.Failed() {
		t.Fatalf("only %d switch-overs", total)
	}
}

// testSeed is $SHIFT_TEST_SEED or a fresh seed.
// testSeed is the base seed of the randomised recovery tests: SHIFT_TEST_SEED=<n> reruns one,
// SHIFT_TEST_SEED=random draws a new one (for soak runs), and the default is a fixed seed so
// that `make test` runs the same schedules every time. Seeds that exposed open bugs are
// listed in docs/STATUS.md.
func testSeed() uint64 {
	s := os.Getenv("SHIFT_TEST_SEED")
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v
	}
	if s == "random" {
		return uint64(time.Now().UnixNano())
	}
	return defaultTestSeed
}

// defaultTestSeed is the fixed base seed of `make test`.
const defaultTestSeed = 20261122

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestActiveSwitch: a healthy QP is moved to the backup on demand, stays there while a stream
// runs, and comes back on SwitchToDefault; no message is lost, duplicated or reordered.
func TestActiveSwitch(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e := newEnvWith(t, 256, recoverOpts)
	a, b := e.pairs(t, 1, cp)
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 100, size: 512, failAt: -1, seed: 5})
	if err := a[0].SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	if err := a[0].SwitchToBackup(); err == nil {
		t.Fatal("second SwitchToBackup accepted")
	}
	waitFor(t, "both QPs on the backup", func() bool { return allFallback(a[0], b[0]) }, func() string { return e.describe(a[0], b[0]) })
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 200, size: 512, failAt: -1, seed: 6})
	runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 200, size: 512, failAt: -1, seed: 7})
	if a[0].SendState() != SendFallback || e.hosts[0].ctx.Stats().Recoveries != 0 {
		t.Fatalf("left the backup without SwitchToDefault: %s", e.describe(a[0], b[0]))
	}
	a[0].SwitchToDefault()
	waitFor(t, "both QPs back on the default NIC", func() bool { return allDefault(a[0], b[0]) }, func() string { return e.describe(a[0], b[0]) })
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 200, size: 512, failAt: -1, seed: 8})
	if sa := e.hosts[0].ctx.Stats(); sa.Fallbacks != 1 || sa.Recoveries != 1 || !allDefault(a[0], b[0]) {
		t.Fatalf("after the switch back: %s", e.describe(a[0], b[0]))
	}
}

// TestPeerFollowsSwitch: after A's SwitchToBackup the peer B moves its own sends to the backup
// too and keeps them there, with the default path healthy and B's probe interval short,
// until A switches back; then both return to the default NIC.
func TestPeerFollowsSwitch(t *testing.T) {
	e := newEnvWith(t, 256, recoverOpts)
	a, b := e.pairs(t, 1, smallCap)
	if err := a[0].SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	desc := func() string { return e.describe(a[0], b[0]) }
	waitFor(t, "both QPs on the backup", func() bool { return allFallback(a[0], b[0]) }, desc)
	// B's sends run on the backup through several of its probe intervals (10 ms): WRITEs from
	// B and a stream from A, then B's state is still Fallback and B probed nothing.
	bWrites(t, e, b[0], 50)
	runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 200, size: 1024, failAt: -1, seed: 32})
	bWrites(t, e, b[0], 50)
	if !allFallback(a[0], b[0]) || e.hosts[1].ctx.Stats().Probes != 0 || e.hosts[1].ctx.Stats().Recoveries != 0 {
		t.Fatalf("B left the backup while A was switched: %s, B stats %+v", desc(), e.hosts[1].ctx.Stats())
	}
	a[0].SwitchToDefault()
	waitFor(t, "both QPs back on the default NIC", func() bool { return allDefault(a[0], b[0]) }, desc)
	bWrites(t, e, b[0], 10)
}

// bWrites posts n signaled WRITEs from host 1's QP qb into host 0's buffer, one at a time,
// each completing successfully.
func bWrites(t *testing.T, e *testEnv, qb *QP, n int) {
	t.Helper()
	ha, hb := e.hosts[0], e.hosts[1]
	p := &poller{t: t, cq: hb.cq}
	for i := range n {
		if err := qb.PostSend([]verbs.SendWR{{WRID: uint64(7000 + i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{hb.mr.SGE(bufSize-4096, 256)}, RemoteAddr: ha.mr.Addr() + bufSize - 4096, RKey: ha.mr.RKey()}}); err != nil {
			t.Fatal(err)
		}
		ws := p.next(time.Now().Add(20 * time.Second))
		if len(ws) != 1 || ws[0].Status != verbs.WCSuccess || ws[0].WRID != uint64(7000+i) {
			t.Fatalf("B's WRITE %d: %+v", i, ws)
		}
	}
}

// TestRecoverRemoteReadOnly: QPs that allow the peer RDMA READ only (perftest's ib_read_bw
// sets no other remote access) come back to the default NICs after a failure. The probe is a
// zero-length RDMA WRITE, which a responder without remote write answers with a NAK: the
// default QPs SHIFT resets allow it (resetAccess), while the application still reads its own
// flags back.
func TestRecoverRemoteReadOnly(t *testing.T) {
	e := newEnvWith(t, 256, recoverOpts)
	e.attr.Access = verbs.AccessRemoteRead | verbs.AccessLocalWrite
	a, b := e.pairs(t, 1, smallCap)
	runStream(t, e, a[0], b[0], stream{mode: modeRead, msgs: 200, size: 2048, failAt: 60, failHost: 1, seed: 43})
	if !allFallback(a[0], b[0]) {
		t.Fatalf("states after the failure: %s", e.describe(a[0], b[0]))
	}
	e.linkUp(1)
	waitFor(t, "both QPs back to Default", func() bool { return allDefault(a[0], b[0]) }, func() string { return e.describe(a[0], b[0]) })
	runStream(t, e, a[0], b[0], stream{mode: modeRead, msgs: 100, size: 2048, failAt: -1, seed: 44})
	if !allDefault(a[0], b[0]) {
		t.Fatalf("left Default without a failure: %s", e.describe(a[0], b[0]))
	}
	for _, q := range []*QP{a[0], b[0]} {
		got, err := q.Query(verbs.QPAttrAccessFlags)
		if err != nil {
			t.Fatal(err)
		}
		if got.AccessFlags != e.attr.Access {
			t.Fatalf("QP %#x reports access %#x, want the application's %#x", q.QPN(), got.AccessFlags, e.attr.Access)
		}
		dev, err := q.Default().QueryOnly(verbs.QPAttrAccessFlags)
		if err != nil {
			t.Fatal(err)
		}
		if dev.AccessFlags != e.attr.Access|verbs.AccessRemoteWrite {
			t.Fatalf("default QP %#x has access %#x after SHIFT's reset, want the application's %#x and remote write", q.QPN(), dev.AccessFlags, e.attr.Access)
		}
		bk, err := q.cs().qp.Load().QueryOnly(verbs.QPAttrAccessFlags)
		if err != nil {
			t.Fatal(err)
		}
		if bk.AccessFlags != e.attr.Access|verbs.AccessRemoteWrite {
			t.Fatalf("QP %#x's backup QP has access %#x, want the application's %#x and remote write", q.QPN(), bk.AccessFlags, e.attr.Access)
		}
	}
	t.Logf("A %+v", e.hosts[0].ctx.Stats())
}
