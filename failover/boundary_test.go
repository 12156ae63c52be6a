package failover

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/provider/verbs"
)

var smallCap = verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}

// waitN polls cq until n completions arrived (guard timeout only).
func waitN(t *testing.T, cq *CQ, n int) []verbs.WC {
	t.Helper()
	p := &poller{t: t, cq: cq}
	var out []verbs.WC
	deadline := time.Now().Add(60 * time.Second)
	for len(out) < n {
		ws := p.next(deadline)
		if ws == nil {
			t.Fatalf("timed out with %d of %d completions: %+v", len(out), n, out)
		}
		out = append(out, ws...)
	}
	return out
}

// expectNoMore checks that cq stays empty for a while (no duplicate, no late completion).
func expectNoMore(t *testing.T, cq *CQ) {
	t.Helper()
	var w [4]verbs.WC
	for range 20 {
		if n, _ := cq.Poll(w[:]); n != 0 {
			t.Fatalf("unexpected completions %+v", w[:n])
		}
		time.Sleep(time.Millisecond)
	}
}

// SENDs whose data landed but whose ACKs were lost are not delivered again: the receiver's
// counter in the handshake tells the sender they arrived.
func TestAckLostNotRedelivered(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	const n = 4
	for i := range 2 * n {
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{hb.mr.SGE(bufSize/2+i*slot, slot)}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.cl.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
	send := func(i int) {
		payload(ha.buf.Bytes()[i*slot:i*slot+512], 99, uint64(i))
		if err := qa.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(i*slot, 512)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		send(i)
	}
	// The receiver gets them at once (the data landed).
	got := waitN(t, hb.cq, n)
	// The sender's retries run out; SHIFT falls back and must not resend them.
	sent := waitN(t, ha.cq, n)
	for i, w := range sent {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) {
			t.Fatalf("sender completion %d: %+v", i, w)
		}
	}
	if qa.SendState() != SendFallback {
		t.Fatalf("sender state %v", qa.SendState())
	}
	if s := e.hosts[0].ctx.Stats(); s.Skipped != n || s.Reposted != 0 {
		t.Fatalf("stats %+v: want %d skipped and none reposted", s, n)
	}
	for i := n; i < 2*n; i++ {
		send(i)
	}
	got = append(got, waitN(t, hb.cq, n)...)
	waitN(t, ha.cq, n)
	for i, w := range got {
		seq := binary.LittleEndian.Uint64(hb.buf.Bytes()[bufSize/2+i*slot:])
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) || seq != uint64(i) || w.ByteLen != 512 {
			t.Fatalf("receive %d: %+v, message %d", i, w, seq)
		}
	}
	expectNoMore(t, hb.cq)
}

// An atomic outstanding at the failure is not retried: the application gets the error and
// the remote value moved at most once.
func TestAtomicNotRetried(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	atomicAckLost(t, e, qa)
	notNotified(t, qa)
	// The responder executed the FADD before its (dropped) response, long before the
	// requester's retries ran out; a second execution could only come from a repost on the
	// backup, and nothing was reposted.
	if s := e.hosts[0].ctx.Stats(); s.Reposted != 0 {
		t.Fatalf("stats %+v: something was reposted on the backup", s)
	}
	if err := qa.PostSend([]verbs.SendWR{{WRID: 6, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(0, 8)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}}); !errors.Is(err, ErrFailed) {
		t.Fatalf("post on a failed QP: %v", err)
	}
}

// TestAtomicNotRetriedAfterRecovery is TestAtomicNotRetried on a default QP whose send side
// came back while its peer's sends stayed on the backup (B does not probe): A's default QP
// stays off the fast path, its completions classified by position (classifyTrackedLocked),
// until B's recovery notification arrives. A network error of the application's WR was
// dropped there, as if it would be reposted, and the fallback the FETCH_AND_ADD refused then
// left it without any completion (simulation seed 136472, where B's notification was late).
func TestAtomicNotRetriedAfterRecovery(t *testing.T) {
	e := newEnvWith(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		if h == 1 {
			o.ProbeInterval, o.ProbeMaxInterval = time.Hour, time.Hour
		}
	})
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	e.linkDown(0)
	if err := qa.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)},
		RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 1 {
		t.Fatalf("WRITE across the failure: %+v", w)
	}
	e.linkUp(0)
	waitFor(t, "A's sends back on the default QP, B's still on the backup", func() bool {
		var wcs [4]verbs.WC
		_, _ = hb.cq.Poll(wcs[:])
		return qa.SendState() == SendDefault && qa.RecvState() == RecvFallback && qb.SendState() == SendFallback
	}, func() string { return e.describe(qa, qb) })
	atomicAckLost(t, e, qa)
	expectNoMore(t, ha.cq)
}

// atomicAckLost posts a FETCH_AND_ADD of 7 from qa (host 0) to a remote value of 1000 whose
// response host 1's default NIC drops: the application must get the original error, qa
// fail (the fallback refused: ErrNotSafe), and the value move exactly once.
func atomicAckLost(t *testing.T, e *testEnv, qa *QP) {
	t.Helper()
	ha, hb := e.hosts[0], e.hosts[1]
	binary.LittleEndian.PutUint64(hb.buf.Bytes()[64:], 1000)
	e.cl.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
	if err := qa.PostSend([]verbs.SendWR{{WRID: 5, Opcode: verbs.WRAtomicFetchAdd, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 8)},
		RemoteAddr: hb.mr.Addr() + 64, RKey: hb.mr.RKey(), CompareAdd: 7}}); err != nil {
		t.Fatal(err)
	}
	w := waitN(t, ha.cq, 1)[0]
	if w.Status == verbs.WCSuccess || w.WRID != 5 {
		t.Fatalf("atomic completion %+v: want the original error", w)
	}
	if qa.SendState() != SendFailed || !errors.Is(qa.Err(), ErrNotSafe) {
		t.Fatalf("state %v err %v", qa.SendState(), qa.Err())
	}
	if v := binary.LittleEndian.Uint64(hb.buf.Bytes()[64:]); v != 1007 {
		t.Fatalf("remote value %d, want 1007 (executed exactly once)", v)
	}
}

// notNotified fails t if q's fallback round sent the peer anything on a control QP: a round
// that must not happen is refused before its notification (checkSendsLocked), so that the
// peer does not move its side for a fallback that fails.
func notNotified(t *testing.T, q *QP) {
	t.Helper()
	for i, bs := range q.sets {
		if ep := bs.ep.Load(); ep != nil && ep.sent.Load() != 0 {
			t.Fatalf("backup set %d: %d control messages sent by a refused fallback", i, ep.sent.Load())
		}
	}
}

// A WR posted with the ineligible hint stops the fallback: error to the application.
func TestIneligibleHint(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	e.linkDown(0)
	if err := qa.PostSend([]verbs.SendWR{{WRID: 9, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | SendIneligible, SGL: []verbs.SGE{ha.mr.SGE(0, 64)},
		RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	w := waitN(t, ha.cq, 1)[0]
	if w.Status != verbs.WCRetryExcErr || w.WRID != 9 {
		t.Fatalf("completion %+v", w)
	}
	if !errors.Is(qa.Err(), ErrNotSafe) {
		t.Fatalf("err %v", qa.Err())
	}
	notNotified(t, qa)
}

// With the backup NIC down too, the application gets errors, and no call hangs.
func TestBackupAlsoDown(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	if err := qb.PostRecv([]verbs.RecvWR{{WRID: 1, SGL: []verbs.SGE{hb.mr.SGE(0, 4096)}}}); err != nil {
		t.Fatal(err)
	}
	e.linkDown(0)
	e.cl.Endpoint(0, 1, 1).SetLinkUp(false)
	if err := qa.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	ws := waitN(t, ha.cq, 1)
	if ws[0].Status == verbs.WCSuccess {
		t.Fatalf("completion %+v: want an error", ws[0])
	}
	if qa.SendState() != SendFailed {
		t.Fatalf("state %v", qa.SendState())
	}
	t.Logf("application saw %v (%v)", ws[0].Status, qa.Err())
}

// KV down at fallback time with the peer's entry not cached (read before the failure:
// rkcache.go): fail closed, the application gets the error.
func TestKVDownFailsClosed(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	e.kv.SetDown(true)
	dropMRs(ha.ctx)
	e.linkDown(0)
	if err := qa.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)},
		RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	w := waitN(t, ha.cq, 1)[0]
	if w.Status != verbs.WCRetryExcErr || w.WRID != 3 {
		t.Fatalf("completion %+v", w)
	}
	if qa.SendState() != SendFailed || !errors.Is(qa.Err(), kv.ErrUnavailable) || !errors.Is(qa.Err(), ErrBackupNotReady) {
		t.Fatalf("state %v err %v", qa.SendState(), qa.Err())
	}
}

// Failure injection: the corrupted WR fails its QP with a local protection error, the correct
// copy goes to the backup; the application sees nothing.
func TestInjection(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	e.hosts[0].ctx.Inject(a[0].QPN(), 40)
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 120, size: 2048, failAt: -1, seed: 11})
	if a[0].SendState() != SendFallback {
		t.Fatalf("state %v", a[0].SendState())
	}
}

// Options.Inject arms the injection when the context opens (the edges set it from
// SHIFT_INJECT): the 40th WR with a key on any of host 0's QPs fails on the default NIC.
func TestInjectionOption(t *testing.T) {
	if _, err := OpenContext(nil, Options{Inject: InjectSpec{QPN: 1 << 24, N: 1}}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("a QPN above 24 bits: %v, want ErrBadConfig", err)
	}
	e := newEnvWith(t, 256, func(h int, o *Options) {
		if h == 0 {
			o.Inject = InjectSpec{N: 40}
		}
	})
	a, b := e.pairs(t, 1, smallCap)
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 120, size: 2048, failAt: -1, seed: 11})
	// Fired: the QP fell back (and may have recovered since, on a slow machine).
	if st := a[0].SendState(); st != SendFallback && e.hosts[0].ctx.Stats().Fallbacks == 0 {
		t.Fatalf("state %v, no fallback: the injection Options.Inject armed did not fire", st)
	}
}

// The shared-memory switch: another process writes the injection file; the next WR with a
// key on the named QP fails on the default NIC and its correct copy runs on the backup.
// RequestInject returns once the file's watcher closed the QP's send gate, so the countdown
// counts from the first WR posted after it; a writer that stores only the words (another
// language's tool) is served at the watcher's next poll.
func TestInjectionSharedMemory(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testInjectionSharedMemory(t, direct) })
	}
}

func testInjectionSharedMemory(t *testing.T, direct bool) {
	path := filepath.Join(t.TempDir(), "shift-inject")
	e := newEnvWith(t, 256, func(h int, o *Options) {
		if h == 0 {
			o.InjectFile = path
		}
	})
	a, b := e.pairs(t, 1, smallCap)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w [8]byte
	if direct {
		binary.NativeEndian.PutUint32(w[:4], a[0].QPN())
		if _, err := f.WriteAt(w[:4], 8); err != nil {
			t.Fatal(err)
		}
		binary.NativeEndian.PutUint64(w[:], 25)
		if _, err := f.WriteAt(w[:], 0); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for s, _ := sendGateOf(a[0]); s != gateClosed; s, _ = sendGateOf(a[0]) {
			if time.Now().After(deadline) {
				t.Fatal("the watcher did not close the QP's send gate for the words written")
			}
			time.Sleep(time.Millisecond)
		}
	} else if err := RequestInject(path, a[0].QPN(), 25, 10*time.Second); err != nil {
		t.Fatal(err)
	} else if s, ic := sendGateOf(a[0]); s != gateClosed || !ic {
		t.Fatalf("RequestInject returned with the send gate %d (injClosed %v)", s, ic)
	}
	runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 100, size: 2048, failAt: -1, seed: 12})
	if st := a[0].SendState(); st != SendFallback && e.hosts[0].ctx.Stats().Fallbacks == 0 {
		t.Fatalf("state %v, no fallback: the injected fault did not fire", st)
	}
	if _, err := f.ReadAt(w[:], 0); err != nil || binary.NativeEndian.Uint64(w[:]) != 0 {
		t.Fatalf("countdown after the fault: %d (%v)", binary.NativeEndian.Uint64(w[:]), err)
	}
}

func TestParseConfig(t *testing.T) {
	m, err := ParseBackupMap("mlx5_0:mlx5_1, mlx5_1:mlx5_0,mlx5_0:mlx5_2")
	if err != nil || len(m["mlx5_0"]) != 2 || m["mlx5_0"][1] != "mlx5_2" || m["mlx5_1"][0] != "mlx5_0" {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"mlx5_0", "mlx5_0:mlx5_0", ":x", "a:b:c"} {
		if _, err := ParseBackupMap(bad); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if s, err := ParseInject("all:3"); err != nil || s.QPN != 0 || s.N != 3 {
		t.Fatalf("%+v %v", s, err)
	}
	if s, err := ParseInject("0x1a:1"); err != nil || s.QPN != 0x1a || s.N != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"all", "x:1", "all:0", "5:-1"} {
		if _, err := ParseInject(bad); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for s := SendDefault; s <= numSendStates; s++ {
		if s.String() == "" {
			t.Fatal("empty state name")
		}
	}
	if SendFallback.String() != "Fallback" || RecvFailed.String() != "Failed" || EvPeerCount.String() != "PeerCount" {
		t.Fatal("state names")
	}
}

// Every transition goes through the table: an illegal one is an error, a legal one counted.
func TestStateTable(t *testing.T) {
	var m machine
	if _, err := m.sendEvent(EvPeerCount); err == nil {
		t.Fatal("Default --PeerCount--> accepted")
	}
	for _, ev := range []Event{EvFailure, EvPeerCount, EvProbeOK, EvFenceWR, EvDrained} {
		if _, err := m.sendEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	if m.sendState() != SendDefault || m.SendTransitions(SendHandshake, SendFallback) != 1 {
		t.Fatalf("state %v", m.sendState())
	}
	if _, err := m.recvEvent(EvRecvMoved); err != nil || m.recvState() != RecvFallback {
		t.Fatal(err)
	}
	if _, err := m.recvEvent(EvRecvMoved); err == nil {
		t.Fatal("Fallback --RecvMoved--> accepted")
	}
}

func TestChooseBackups(t *testing.T) {
	e := newEnv(t, 16)
	def := e.prefix + "0"
	t.Setenv("SHIFT_BACKUP", e.prefix+"2:"+e.prefix+"3") // the library reads no environment
	auto, err := chooseBackups(def, Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range auto {
		if d == def {
			t.Fatalf("automatic selection %v names the default device", auto)
		}
		found = found || d == e.prefix+"1"
	}
	if !found {
		t.Fatalf("automatic selection %v misses %s1", auto, e.prefix)
	}
	if b, err := chooseBackups(def, Options{Backups: []string{e.prefix + "1"}}); err != nil || len(b) != 1 || b[0] != e.prefix+"1" {
		t.Fatalf("Options.Backups: %v %v", b, err)
	}
}

// A peer MR missing from the KV store at fallback time (never published, or deleted): the
// fallback fails closed and the application gets the original error.
func TestKVEntryMissingFailsClosed(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	if err := e.kv.Delete(context.Background(), hb.ctx.mrKey(hb.gid, hb.mr.RKey())); err != nil {
		t.Fatal(err)
	}
	refreshMRs(t, ha.ctx, hb.gid) // the cache, filled when the QP connected, sees it gone
	e.linkDown(0)
	if err := qa.PostSend([]verbs.SendWR{{WRID: 4, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)},
		RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	w := waitN(t, ha.cq, 1)[0]
	if w.Status != verbs.WCRetryExcErr || w.WRID != 4 {
		t.Fatalf("completion %+v", w)
	}
	if !errors.Is(qa.Err(), kv.ErrNotFound) {
		t.Fatalf("err %v, want kv.ErrNotFound", qa.Err())
	}
	notNotified(t, qa)
}

// A WR whose remote range lies outside the MR the peer's entry describes, flushed behind the
// error: its key is in the cache and good, so the initiator checks the keys after its
// notification (checkKeptLocked). That check fails: the round is withdrawn and both QPs fail,
// the peer (which moved its side for the notification) at once and not at a timeout, and the
// application gets each WR's completion once, the first with the original error.
func TestLateCheckWithdraws(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	// The peer's receives move to its backup with the notification and are flushed once
	// when its QP fails on the withdrawal.
	for i := range 4 {
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(50 + i), SGL: []verbs.SGE{hb.mr.SGE(i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.linkDown(0)
	beyond := hb.mr.Addr() + uint64(len(hb.buf.Bytes())) // where the peer's MR ends
	if err := qa.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(64, 64)}, RemoteAddr: beyond, RKey: hb.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	ws := waitN(t, ha.cq, 2)
	if ws[0].WRID != 1 || ws[0].Status != verbs.WCRetryExcErr || ws[1].WRID != 2 || ws[1].Status != verbs.WCWRFlushErr {
		t.Fatalf("completions %+v: want wr 1 with the original error, wr 2 flushed", ws)
	}
	if qa.SendState() != SendFailed || !errors.Is(qa.Err(), ErrBadEntry) {
		t.Fatalf("state %v, err %v: want Failed with ErrBadEntry", qa.SendState(), qa.Err())
	}
	if n := qa.sets[0].ep.Load().sent.Load(); n != 2 {
		t.Fatalf("%d control messages sent, want the notification and its withdrawal", n)
	}
	waitFor(t, "the peer's QP to fail", func() bool { return qb.SendState() == SendFailed },
		func() string { return e.describe(qa, qb) })
	if !errors.Is(qb.Err(), ErrFailed) {
		t.Fatalf("peer's err %v, want ErrFailed (refused)", qb.Err())
	}
	rs := waitN(t, hb.cq, 4)
	for i, w := range rs {
		if w.WRID != uint64(50+i) || w.Status != verbs.WCWRFlushErr {
			t.Fatalf("peer's receive completions %+v: want 50-53 flushed, in order", rs)
		}
	}
	expectNoMore(t, ha.cq)
	expectNoMore(t, hb.cq)
}

// The withdrawal when both sides notified at once: the peer, in its own handshake, takes our
// notification for its answer and reposts its SEND towards our backup QP, which failed; the
// withdrawal behind that notification fails it. Each WR on either side completes once, with
// an error, and both QPs end Failed.
func TestLateCheckWithdrawsCrossing(t *testing.T) {
	e := newEnv(t, 256)
	// Retries long enough that the blackholed control QPs outlast the wait for both sides.
	e.attr.Timeout, e.attr.RetryCnt = 14, 7
	a, b := e.pairs(t, 1, smallCap)
	qs := [2]*QP{a[0], b[0]}
	ha, hb := e.hosts[0], e.hosts[1]
	for h, hs := range e.hosts {
		if err := qs[h].PostRecv([]verbs.RecvWR{{WRID: 100, SGL: []verbs.SGE{hs.mr.SGE(thDst, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for h := range 2 {
		e.cl.Endpoint(h, 1, 1).Faults(fabric.TX).SetBlackhole(true)
	}
	e.linkDown(0)
	beyond := hb.mr.Addr() + uint64(len(hb.buf.Bytes()))
	if err := qs[0].PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(64, 64)}, RemoteAddr: beyond, RKey: hb.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	if err := qs[1].PostSend([]verbs.SendWR{{WRID: 11, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{hb.mr.SGE(thSrc, 64)}}}); err != nil {
		t.Fatal(err)
	}
	var got [2][]verbs.WC
	poll := func() { e.pollHosts(t, &got) }
	desc := func() string { return fmt.Sprintf("%s; completions %+v %+v", e.describe(qs[0], qs[1]), got[0], got[1]) }
	waitFor(t, "A withdrawn and B in its handshake", func() bool {
		poll()
		return qs[0].SendState() == SendFailed && qs[1].SendState() == SendHandshake
	}, desc)
	for h := range 2 {
		e.cl.Endpoint(h, 1, 1).Faults(fabric.TX).SetBlackhole(false)
	}
	waitFor(t, "B failed and three completions on A's side, two on B's", func() bool {
		poll()
		return qs[1].SendState() == SendFailed && len(got[0]) >= 3 && len(got[1]) >= 2
	}, desc)
	expectNoMore(t, ha.cq)
	expectNoMore(t, hb.cq)
	for h, want := range [2][]uint64{{1, 2, 100}, {11, 100}} {
		var ids []uint64
		for _, c := range got[h] {
			if c.Status == verbs.WCSuccess {
				t.Fatalf("host %d: completion %+v, want errors only; %s", h, c, desc())
			}
			ids = append(ids, c.WRID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			t.Fatalf("host %d: wr_ids %v, want %v once each; %s", h, ids, want, desc())
		}
	}
	if !errors.Is(qs[0].Err(), ErrBadEntry) || !errors.Is(qs[1].Err(), ErrFailed) {
		t.Fatalf("errors %v / %v: want ErrBadEntry and ErrFailed", qs[0].Err(), qs[1].Err())
	}
}

// A post that fails because the default QP is known to be in ERR falls back at once, and the
// WR goes to the backup.
func TestFailedPostFallsBack(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	if err := qb.PostRecv([]verbs.RecvWR{{WRID: 1, SGL: []verbs.SGE{hb.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	// The default QP breaks (as the NIC would move it to ERR) and the application learns it
	// from the post.
	if err := qa.Default().Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	payload(ha.buf.Bytes()[:64], 1, 0)
	if err := qa.PostSend([]verbs.SendWR{{WRID: 8, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 8 {
		t.Fatalf("send completion %+v", w)
	}
	if w := waitN(t, hb.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 1 || !bytes.Equal(hb.buf.Bytes()[:64], ha.buf.Bytes()[:64]) {
		t.Fatalf("receive %+v", w)
	}
	if qa.SendState() != SendFallback {
		t.Fatalf("state %v", qa.SendState())
	}
}
