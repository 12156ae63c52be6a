package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The faults of issue 14 beyond the fabric's (nicfault.go, kvfault.go, pause.go): a NIC dying
// or hanging, a backup dying after a fallback, the KV store down or slow, a host's process
// paused. They are drawn, over the failover layer only, from a stream of their own (a second
// PCG of the run's seed), so a seed that draws none of them runs exactly as before they
// existed, and the replay command of a failing seed replays them too.

// FaultCounts are the faults a run drew (Result.Faults).
type FaultCounts struct {
	Kills       int // default NICs that died (DEVICE_FATAL)
	Hangs       int // default NICs that hung silently
	BackupKills int // backup NICs that died after a fallback (two backups)
	BackupHangs int // backup NICs that hung after a fallback (two backups)
	KVDowns     int // windows in which the KV store was down
	KVSlows     int // windows in which every KV call took virtual time (or timed out)
	KVRefused   int // KV calls that failed in those windows
	Pauses      int // a host's process not stepped for a while
	LongPauses  int // of Pauses, those longer than HandshakeTimeout
	LateCQEs    int // holds of a backup QP's receive CQEs (latecqe.go)
}

func (f *FaultCounts) add(o FaultCounts) {
	f.Kills += o.Kills
	f.Hangs += o.Hangs
	f.BackupKills += o.BackupKills
	f.BackupHangs += o.BackupHangs
	f.KVDowns += o.KVDowns
	f.KVSlows += o.KVSlows
	f.KVRefused += o.KVRefused
	f.Pauses += o.Pauses
	f.LongPauses += o.LongPauses
	f.LateCQEs += o.LateCQEs
}

func (f FaultCounts) String() string {
	return fmt.Sprintf("%d NIC deaths, %d NIC hangs, %d backup deaths, %d backup hangs, %d KV downs, %d KV slow windows (%d KV calls failed), %d pauses (%d past HandshakeTimeout), %d late-CQE holds",
		f.Kills, f.Hangs, f.BackupKills, f.BackupHangs, f.KVDowns, f.KVSlows, f.KVRefused, f.Pauses, f.LongPauses, f.LateCQEs)
}

// faultState is the run's state of these faults.
type faultState struct {
	r *rand.Rand // the faults' own stream of the seed
	// nic is the NIC fault drawn (nicNone, nicKill, nicHang, nicBackupKill, nicBackupHang) and host the
	// host it hits; bkLeft is 1 while a backup's death waits for the first fallback.
	nic, host, bkLeft int
	// bkHost is the host whose backup the backup fault hits, once drawn (-1 before).
	bkHost int
	// left counts the faults scheduled and not yet begun: the workload goes on until they
	// did (as the chained failure's chainLeft), so a fault drawn late is not drawn for
	// nothing after a short run ended.
	left   int
	paused [2]bool
	// mute is 1 + the host whose application posts no send WR in the run (0: none): a hung
	// NIC's peer with nothing outstanding towards it never learns of the hang from its own
	// retry timer, so only the hung side's completion watchdog can find it.
	mute int
	log  []event // the fault events, for a violation's report
}

// fault records a fault event in the trace and in the run's list of faults.
func (s *runner) fault(code, a, b, c uint64) {
	s.record(evFault, code, a, b, c)
	s.fx.log = append(s.fx.log, s.tail[(s.nev-1)%len(s.tail)])
}

// faultLog lists the run's fault events, for a violation.
func (s *runner) faultLog() []string {
	var out []string
	for _, e := range s.fx.log {
		out = append(out, "fault: "+e.String())
	}
	return out
}

// Fault codes in the trace (evFault's first value).
const (
	fxKill = iota + 1
	fxHang
	fxBackupKill
	fxKVDown
	fxKVSlow
	fxKVUp
	fxPause
	fxResume
	fxLateCQEs
	fxLateRelease
	fxBackupHang
)

// setupFaults starts the fault stream and draws the faults of the set-up (the KV store down
// or slow while the shadows are built). Before the shadows.
func (s *runner) setupFaults() {
	s.fx.r = rand.New(rand.NewPCG(s.cfg.Seed, 0x4641554c5453)) // "FAULTS"
	s.fx.bkHost = -1
	if !s.cfg.Failover {
		return
	}
	s.kvSetupFault()
}

// drawFaults draws the faults of the run, once the shadows are built.
func (s *runner) drawFaults() {
	if !s.cfg.Failover {
		return
	}
	s.nicFault()
	s.kvFault()
	s.pauseFault()
	s.lateFault()
}

// faultAt draws the instant of a fault: in the first 10 ms after the shadows are built (a
// run's traffic lasts from about 10 ms, without a long link down, to a few hundred).
func (s *runner) faultAt() time.Duration {
	return time.Duration(s.fx.r.IntN(10_000)) * time.Microsecond
}

// fallbackAt takes one host's default link down past the RC reach at d from now, so that a
// fallback runs inside a fault's window (the KV store down, a host paused): what the fault
// must not cost is the fallback's.
func (s *runner) fallbackAt(d time.Duration) {
	i := s.fx.r.IntN(2) * len(s.w.hosts[0].nics)
	long := time.Duration(140+s.fx.r.IntN(60)) * time.Millisecond // as longDown: past the 134 ms reach
	s.after(d, func() { s.down(i, long) })
}

// after runs fn at d from now, as a fault the run waits for (left).
func (s *runner) after(d time.Duration, fn func()) {
	s.fx.left++
	s.w.clk.AfterFunc(d, func() {
		s.fx.left--
		fn()
	})
}

// faultShare is the percentage of runs that draw a KV window or a pause: 8, or 4 with
// recovery, where the default link down that comes with them makes a run about ten times
// longer (every QP must come back: 40,000-70,000 steps against 2,000-10,000).
func (s *runner) faultShare() int {
	if s.cfg.Recovery {
		return 4
	}
	return 8
}

// faultStep runs, each step, what waits for a condition rather than a time (a backup's death
// after the first fallback).
func (s *runner) faultStep() {
	if s.fx.bkLeft > 0 {
		s.backupKillStep()
	}
	s.lateStep()
}
