package sim

import "testing"

// TestFaultSeeds replays, twice each, failover seeds of TestFailoverSeeds that draw the
// faults of faults.go (the same seed gives the same trace with them too), and checks that
// each still draws its fault: a change of the workload or of the fault mix may need other
// seeds here. Several are the seeds that found the SHIFT bugs these faults showed:
//
//   - 34 (two backups): a default NIC hung while the peer's traffic timed out first; the
//     drain of the hung default QP waited DrainTimeout and the peer gave up at its
//     HandshakeTimeout (failover/drainhang.go; found at seed 10, which since draws atomics
//     and ineligible WRs whose refusals end its run before a drain; 34 fails with the
//     drain's hang bound off).
//   - 46, 318 (two backups): a backup NIC died after the fallback; the chain waited for the
//     dead set's flushes, and a QP still on its default path kept the dead set for its next
//     fallback (failover/bkdead.go; found at seeds 14 and 238, which since draw unsafe WRs;
//     46 and 318 fail with the backup's DEVICE_FATAL ignored).
//   - 1903 (recovery, one backup, as found; the mix runs it with two): a host paused past
//     the watchdog's bound took its working NIC for hung on resuming (failover/watchdog.go,
//     the queued failure).
//   - 1171 (recovery): the emulator's event queue hung in Close behind a backup channel
//     nobody read (mlx5/emu/eventq.go, withdraw).
//   - 63 (recovery, two backups): late CQEs on the receiver's backup QP; a receive recovery
//     that read its counter after one poll of the backup CQ lost the message whose CQE came
//     after the peer's recovery notification (failover/recvcount.go; fails, stuck, with the
//     wait off). The same fault in TestNetnsRoCEv2Flapping/send over real veths.
//   - 3067 (recovery): late CQEs of fillers; the receiver counted the stale RECVs they had
//     consumed again, the surplus fillers consumed application receives and a SEND arrived
//     as zero bytes (failover/stale.go: both sides count all-time totals now).
//   - 79, 126 (two backups): a backup NIC hung silently after the fallback. At 79 the peer
//     chained first and the drain of the hung set waited DrainTimeout while the peer gave up
//     (failover/drainhang.go, the backup set's drain; fails with it off); at 126 nothing but
//     the watchdog on the backup in use could find it (failover/watchdog_backup.go; fails
//     with it off). Both failed with an error completion given to the application.
//
// 550 pauses a host past the peer's HandshakeTimeout: the peer's handshakes expire and its
// QPs fail (78 error completions), as documented, and the resumed host's fail after them;
// nothing is duplicated, reordered or left without a completion. 345712 and 361513 (one
// backup, from the scan of 345,000–365,000) pause a host past it too, and while it is
// paused the other host's watchdog takes that host's own backup NIC, which is alive, for
// hung: the QP fails, SHIFT completes the WRs on the set itself, as a dead device writes
// nothing, and the NIC then wrote their flushes (the QP moved to ERR), which were given to
// the application too: each completed twice (failover/cq.go now drops a set's completions
// once SHIFT answered for it).
//
// 25 is a hang whose peer posts nothing: only the completion watchdog finds it. 59261
// (beyond the tested range) is a hang with only unsignaled WRs behind it: the watchdog has
// nothing to watch until the drain's signaled WRITE, and the simulation's liveness check
// took the peer's wait for them for stuck (stuck.go).
func TestFaultSeeds(t *testing.T) {
	cases := []struct {
		seed uint64
		want func(FaultCounts) bool
		cfg  *Config // nil: the seed's configuration in TestFailoverSeeds
	}{
		{13, func(f FaultCounts) bool { return f.Kills > 0 }, nil},
		{34, func(f FaultCounts) bool { return f.Hangs > 0 }, nil},
		{25, func(f FaultCounts) bool { return f.Hangs > 0 }, nil},
		{46, func(f FaultCounts) bool { return f.BackupKills > 0 }, nil},
		{318, func(f FaultCounts) bool { return f.BackupKills > 0 }, nil},
		{17, func(f FaultCounts) bool { return f.KVDowns > 0 }, nil},
		{4, func(f FaultCounts) bool { return f.KVSlows > 0 }, nil},
		{41, func(f FaultCounts) bool { return f.Pauses > 0 }, nil},
		{1903, func(f FaultCounts) bool { return f.Pauses > 0 }, &Config{Seed: 1903, Failover: true, Recovery: true}},
		{1171, func(f FaultCounts) bool { return f.Pauses > 0 }, nil},
		{550, func(f FaultCounts) bool { return f.LongPauses > 0 }, nil},
		{345712, func(f FaultCounts) bool { return f.LongPauses > 0 }, nil},
		{361513, func(f FaultCounts) bool { return f.LongPauses > 0 }, nil},
		{63, func(f FaultCounts) bool { return f.LateCQEs > 0 }, nil},
		{3067, func(f FaultCounts) bool { return f.LateCQEs > 0 }, nil},
		{79, func(f FaultCounts) bool { return f.BackupHangs > 0 }, nil},
		{126, func(f FaultCounts) bool { return f.BackupHangs > 0 }, nil},
		{59261, func(f FaultCounts) bool { return f.Hangs > 0 }, nil},
	}
	for _, tc := range cases {
		cfg := seedConfig(tc.seed, true)
		if tc.cfg != nil {
			cfg = *tc.cfg
		}
		a, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("seed %d: two runs differ:\n%+v\n%+v", tc.seed, a, b)
		}
		if !tc.want(a.Faults) {
			t.Errorf("seed %d no longer draws its fault: %v", tc.seed, a.Faults)
		}
	}
}

// TestFlappingBackupSeed replays seed 14092 of the failover mix (one backup, its default
// NIC dead, a pause): the simulation's fault model drew short downs on one backup path so
// close together that each of the 8 tries of a backup QP's WR met one and the QP failed with
// retry exceeded (flapGap, sim.go). The seed must pass and must still meet the gap.
func TestFlappingBackupSeed(t *testing.T) {
	res, err := Run(seedConfig(14092, true))
	if err != nil {
		t.Fatal(err)
	}
	if res.Flaps == 0 || res.Faults.Kills == 0 || res.Faults.Pauses == 0 {
		t.Errorf("seed 14092 no longer draws a short down too close to the last on a backup path, with a NIC death and a pause: %d flaps, %v", res.Flaps, res.Faults)
	}
}

// TestLastPathLoss checks the random loss each endpoint gets: the drawn loss everywhere but
// on the last backup path over the failover layer, where it is bounded (lastPathLoss), on
// both hosts and with one or two backups.
func TestLastPathLoss(t *testing.T) {
	for _, c := range []struct {
		loss     float64
		nics     int
		failover bool
		want     []float64 // by endpoint: host 0's NICs, then host 1's
	}{
		{0.05, 2, true, []float64{0.05, lastPathLoss, 0.05, lastPathLoss}},
		{0.05, 3, true, []float64{0.05, 0.05, lastPathLoss, 0.05, 0.05, lastPathLoss}},
		{0.001, 3, true, []float64{0.001, 0.001, 0.001, 0.001, 0.001, 0.001}},
		{0.05, 2, false, []float64{0.05, 0.05, 0.05, 0.05}},
		{0.05, 1, false, []float64{0.05, 0.05}},
	} {
		for i, want := range c.want {
			if got := pathLoss(c.loss, i, c.nics, c.failover); got != want {
				t.Errorf("loss %v, %d NICs, failover %v: endpoint %d got %v, want %v", c.loss, c.nics, c.failover, i, got, want)
			}
		}
	}
}
