package sim

import (
	"math/rand/v2"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/nic"
)

// NIC faults (issue 14; docs/FAILOVER.md "Dead NICs"), at most one per run:
//
//   - A default NIC dies (nic.Device.Kill): DEVICE_FATAL on the async descriptors, its ports
//     down for good, no CQE or packet any more. The stepped context reads the event in its
//     next Step (failover/async_step.go) and moves every QP to the backup without waiting for
//     the dead NIC's flushes. Invariant: nothing lost, duplicated or reordered, no error
//     completion (as for a long link down); the QPs stay on the backup (with recovery the
//     run does not wait for them to come back: nothing probes a dead NIC).
//   - A default NIC hangs (nic.Device.Hang): no CQE, no event, no packet, link up. Only the
//     completion watchdog can tell (Options.CQWatchdog, a timer on the virtual clock in a
//     stepped context, failover/watchdog_step.go), and the peer's retry timer when the peer
//     has traffic towards it: in half of these runs the peer posts no send WR at all, so
//     that only the watchdog can. Invariant: as for a death.
//   - With two backups, the first backup NIC of one host dies once the first fallback ran
//     (the default's death drawn with it, so that there is one): the QPs chain to the second
//     backup. Invariant: as for a death.
//   - With two backups, in a run without any of the faults above, the first backup NIC of
//     one host hangs silently once the first fallback ran (drawn from a stream of its own, so
//     that the runs without it replay as before): the watchdog on the backup in use, a drain
//     of the set that finds it flushing nothing, or the peer's retry timer must find it, and
//     the QPs chain to the second backup. Invariant: as for a death.
//
// Each in a modest share of failover runs, at a virtual instant drawn in the first 10 ms
// after the shadows are built.

const (
	nicNone = iota
	nicKill
	nicHang
	nicBackupKill
	nicBackupHang
)

// backupHangStream is the PCG stream, beside the seed, that draws a backup's hang.
const backupHangStream = 0x424b48414e47 // "BKHANG"

// watchdogBound is the sim's Options.CQWatchdog. The layer never applies less than twice the
// QP's retry reach (2 × 134 ms here), so the watchdog fires at most 268 ms + a quarter of that
// after the last completion of a hung NIC.
const watchdogBound = 100 * time.Millisecond

// nicFault draws the run's NIC fault.
func (s *runner) nicFault() {
	x := s.fx.r.IntN(100)
	switch {
	case x < 6:
		s.fx.nic = nicKill
	case x < 12:
		s.fx.nic = nicHang
	case x < 20 && s.cfg.Backups >= 2:
		s.fx.nic = nicBackupKill
	default:
		if s.cfg.Backups >= 2 && rand.New(rand.NewPCG(s.cfg.Seed, backupHangStream)).IntN(100) < 10 {
			s.fx.nic = nicBackupHang
			s.fx.bkLeft = 1
			s.fx.left++               // until the backup hung (backupKillStep)
			s.fallbackAt(s.faultAt()) // so that there is a fallback
		}
		return
	}
	s.fx.host = s.fx.r.IntN(2)
	// (Not with a receive-only QP: a hung host whose QPs send nothing, facing a peer that
	// sends nothing either, has nothing for anyone to find the hang by.)
	if s.fx.nic == nicHang && s.fx.r.IntN(2) == 0 && !s.res.RecvOnly {
		s.fx.mute = 1 + (1 - s.fx.host) // the peer sends nothing: only the watchdog can tell
	}
	at := s.faultAt()
	h := s.fx.host
	d := s.w.hosts[h].nics[0]
	switch s.fx.nic {
	case nicKill, nicBackupKill:
		s.after(at, func() {
			s.res.Faults.Kills++
			s.fault(fxKill, uint64(h), 0, 0)
			d.Kill()
		})
		if s.fx.nic == nicBackupKill {
			s.fx.bkLeft = 1
			s.fx.left++ // until the backup died (backupKillStep)
		}
	case nicHang:
		s.after(at, func() {
			s.res.Faults.Hangs++
			s.fault(fxHang, uint64(h), 0, 0)
			d.Hang()
		})
	}
}

// backupKillStep kills (or hangs) one host's first backup NIC once a fallback ran (or was
// refused, or a QP the application stopped left none to run, as chainStep: then none may
// come, and the run must not wait for it; seed 17039, beyond the 10,000 the tests run). Not
// while that NIC holds receive CQEs back (latecqe.go): a NIC that acknowledged messages and
// then never writes their CQEs loses them for the receiver, and the sender, whose
// completions returned the buffers to its application, cannot send them again: beyond what
// any transparent failover can recover (found at seed 1178, a hang). The fault waits for the
// release.
func (s *runner) backupKillStep() {
	for _, h := range s.w.hosts {
		if st := h.fo.Stats(); st.Fallbacks > 0 || st.Refused > 0 || st.AppStops > 0 {
			if s.fx.bkHost < 0 {
				if s.fx.nic == nicBackupHang {
					s.fx.bkHost = rand.New(rand.NewPCG(s.cfg.Seed, backupHangStream+1)).IntN(2)
				} else {
					s.fx.bkHost = s.fx.r.IntN(2)
				}
			}
			hb := s.fx.bkHost
			d := s.w.hosts[hb].nics[1]
			if s.late.held == d {
				return
			}
			s.fx.bkLeft = 0
			s.fx.left--
			if s.fx.nic == nicBackupHang {
				s.res.Faults.BackupHangs++
				s.fault(fxBackupHang, uint64(hb), 1, 0)
				d.Hang()
				return
			}
			s.res.Faults.BackupKills++
			s.fault(fxBackupKill, uint64(hb), 1, 0)
			d.Kill()
			return
		}
	}
}

// defaultsHealthy reports whether every default NIC still works (with recovery, the run waits
// for the QPs to come back to their default NICs only then).
func (s *runner) defaultsHealthy() bool {
	for _, h := range s.w.hosts {
		if h.nics[0].Health() != nic.Healthy {
			return false
		}
	}
	return true
}

// muted reports whether host h's application posts no send WR in this run (faultState.mute).
func (s *runner) muted(h int) bool { return s.fx.mute == h+1 }
