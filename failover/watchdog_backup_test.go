package failover

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestHungBackupWatchdog: three NICs per host; host 0's default link fails, and later its
// first backup NIC hangs silently while a WRITE stream runs there. The stream must go on on
// the second backup, exactly once and in order, with host 0 having taken the hung backup
// for dead:
//   - probes an hour apart: the peer only answers and sends nothing, so only host 0's
//     watchdog on the backup in use can find the hang (watchdog_backup.go);
//   - probes as usual: the peer's reset round after a failed probe fails on the hung device
//     and the peer chains first; host 0 follows, and the drain of the set it leaves finds
//     the device hung (drainhang.go) before the peer's HandshakeTimeout (before, it waited
//     DrainTimeout and both QPs failed).
func TestHungBackupWatchdog(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	const bound = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		probe time.Duration
	}{{"watchdog", time.Hour}, {"peer-chain", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			e, qa, qb := threeNICPair(t, cp, func(o *Options) {
				o.CQWatchdog = bound
				o.ProbeInterval, o.ProbeMaxInterval = tc.probe, tc.probe
			})
			hang := func() { e.cl.Hosts[0].Devices[1].NIC().Hang() }
			start := time.Now()
			runStream(t, e, qa, qb, stream{mode: modeWrite, msgs: 240, size: 4096, failAt: 60, failHost: 0, seed: 71,
				at: map[int]func(){120: hang}})
			sa, sb := e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats()
			if sa.WatchdogBackups != 1 || sa.Chains == 0 {
				t.Fatalf("the hung backup was not taken for dead: stats A %+v", sa)
			}
			if qa.BackupIndex() != 1 || qb.BackupIndex() != 1 {
				t.Fatalf("backups in use %d %d, want 1 (the second): %s", qa.BackupIndex(), qb.BackupIndex(), e.describe(qa, qb))
			}
			if sa.WatchdogFallbacks != 0 {
				t.Errorf("the default NIC (link down, not hung) was taken for hung: %+v", sa)
			}
			if tc.probe == time.Hour && (sa.Probes != 0 || sb.Probes != 0) {
				t.Errorf("probes ran: A %d, B %d", sa.Probes, sb.Probes)
			}
			t.Logf("stream with the backup hung: %v (bound %v); chains A %d B %d, probes A %d B %d",
				time.Since(start), bound, sa.Chains, sb.Chains, sa.Probes, sb.Probes)
		})
	}
}

// TestHungBackupDuringHandshake: three NICs per host; host 0's first backup NIC hangs before
// anything fails, then host 0's default link fails under a WRITE stream. Host 0's round runs
// on the first backup set, whose control QP is on the hung NIC: its notification is neither
// sent nor failed, no WR is due on a backup data QP (the round holds the sends), and the peer,
// which only receives and does not probe, never starts a round of its own. The watchdog's
// watch of the control endpoints takes the hung NIC for dead and the QP chains to the second
// backup well within the HandshakeTimeout (watchdog_ctl.go; before, the round waited for the
// timeout and the QP failed: internal/sim failover seed 270 with two backups).
func TestHungBackupDuringHandshake(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	const bound, handshake = 300 * time.Millisecond, 30 * time.Second
	e, qa, qb := threeNICPair(t, cp, func(o *Options) {
		o.CQWatchdog = bound
		o.HandshakeTimeout = handshake
		o.ProbeInterval, o.ProbeMaxInterval = time.Hour, time.Hour
	})
	e.cl.Hosts[0].Devices[1].NIC().Hang()
	start := time.Now()
	runStream(t, e, qa, qb, stream{mode: modeWrite, msgs: 120, size: 4096, failAt: 40, failHost: 0, seed: 73})
	el := time.Since(start)
	sa := e.hosts[0].ctx.Stats()
	if sa.WatchdogBackups != 1 || sa.Chains == 0 {
		t.Fatalf("the hung backup was not taken for dead: stats A %+v", sa)
	}
	if qa.BackupIndex() != 1 || qb.BackupIndex() != 1 {
		t.Fatalf("backups in use %d %d, want 1 (the second): %s", qa.BackupIndex(), qb.BackupIndex(), e.describe(qa, qb))
	}
	if el >= handshake/2 {
		t.Fatalf("the stream took %v: the round waited for its HandshakeTimeout (%v)", el, handshake)
	}
	t.Logf("stream with the first backup hung during the handshake: %v (bound %v)", el, bound)
}

// threeNICPair is a QP pair between two hosts of three NICs each, with opts applied to both
// contexts' options; a failing test logs both QPs and both contexts' stats.
func threeNICPair(t *testing.T, cp verbs.QPCap, opts func(*Options)) (*testEnv, *QP, *QP) {
	t.Helper()
	e := newEnvNICs(t, 256, func(_ int, o *Options) { opts(o) }, false, 3)
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("at failure: A %v, B %v; %s; stats A %+v B %+v", qa.Err(), qb.Err(), e.describe(qa, qb),
				e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats())
		}
	})
	return e, qa, qb
}

// TestAppStopOnHungBackup: a QP runs on its backup, whose own NIC then hangs with WRITEs
// outstanding there, and the application stops the QP (modify_qp to ERR) before the
// watchdog's bound. The backup QP's move to ERR flushes nothing on a hung NIC and nothing else
// of SHIFT's runs on that device, so the watchdog must go on watching the set the QP gave up:
// it takes the device for dead and the WRITEs complete flushed, in order (before, the
// application waited for ever).
func TestAppStopOnHungBackup(t *testing.T) {
	const bound = 200 * time.Millisecond
	e := newEnvWith(t, 256, func(_ int, o *Options) {
		o.CQWatchdog = bound
		o.ProbeInterval, o.ProbeMaxInterval = time.Hour, time.Hour
	})
	a, _ := e.pairs(t, 1, smallCap)
	qa, ha, hb := a[0], e.hosts[0], e.hosts[1]
	if err := qa.SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	write := writes(t, qa, ha, hb)
	e.cl.Hosts[0].Devices[1].NIC().Hang()
	if err := qa.PostSend([]verbs.SendWR{write(10, 64, 0), write(11, 128, verbs.SendSignaled), write(12, 192, verbs.SendSignaled)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the inbox posted", func() bool { return qa.box.nSend.Load() == 0 }, func() string { return "" })
	if err := qa.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	ws := waitN(t, ha.cq, 3)
	for i, w := range ws {
		if w.WRID != uint64(10+i) || w.Status != verbs.WCWRFlushErr {
			t.Fatalf("completions %+v: want wr_id 10, 11, 12 flushed, in order", ws)
		}
	}
	if s := ha.ctx.Stats(); s.WatchdogBackups != 1 {
		t.Fatalf("the hung backup was not taken for dead: stats %+v", s)
	}
}
