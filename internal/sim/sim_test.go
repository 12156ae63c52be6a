package sim

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// seeds is how many seeds TestSeeds (fo false) or TestFailoverSeeds runs: SHIFT_SIM_SEEDS
// for both, or 2,000 over the provider and 10,000 over the failover layer. The failover
// layer is what the simulation is for; its 10,000 seeds alone are the CI budget
// (inside the full `make test` the package took 266–296 s with 10,000 of each, too close
// to five minutes on the 2-core machine), and the provider's invariants, which the failover
// seeds check again over it, have run 10,000 seeds per CI run since the simulation began.
func seeds(fo bool) int {
	if n, err := strconv.Atoi(os.Getenv("SHIFT_SIM_SEEDS")); err == nil && n > 0 {
		return n
	}
	if fo {
		return 10000
	}
	return 2000
}

// TestSeeds runs many seeds over the provider; any broken invariant fails with the replay
// command.
func TestSeeds(t *testing.T) { runSeeds(t, false) }

// TestFailoverSeeds runs many seeds over the failover layer: link downs past the RC reach
// must cost the application nothing but the errors the boundary owes (risky.go: a quarter of
// the seeds post atomics and ineligible WRs). By seed % 8: half use one backup without
// recovery (0, 1, 4, 5), a quarter chain across two backups (2, 6), an eighth add recovery to
// the default NICs with one backup (3) and an eighth with two (7).
func TestFailoverSeeds(t *testing.T) { runSeeds(t, true) }

// seedConfig is the run of seed in TestSeeds (fo false) or TestFailoverSeeds.
// runShaped runs seed over the failover layer with the shapes (as the scans that found the
// pinned seeds did) and fails the test on a violation.
func runShaped(t *testing.T, seed uint64) Result {
	t.Helper()
	c := seedConfig(seed, true)
	c.Shapes = true
	res, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func seedConfig(seed uint64, fo bool) Config {
	c := Config{Seed: seed, Failover: fo}
	if fo {
		switch seed % 8 {
		case 2, 6:
			c.Backups = 2
		case 3:
			c.Recovery = true
		case 7:
			c.Recovery, c.Backups = true, 2
		}
		c.CtlDrop = drawCtlDrop(seed)
	}
	return c
}

func runSeeds(t *testing.T, fo bool) {
	n := seeds(fo)
	start := time.Now()
	var tot Result
	recvOnly, restricted, deep := 0, 0, 0
	var heap0 uint64
	for seed := uint64(1); seed <= uint64(n); seed++ {
		cfg := seedConfig(seed, fo)
		cfg.Shapes = fo
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if seed == heapMark {
			heap0 = liveHeap()
		}
		tot.Steps += res.Steps
		tot.Posts += res.Posts
		tot.Errors += res.Errors
		tot.LinkDowns += res.LinkDowns
		tot.LongDowns += res.LongDowns
		tot.AckLosses += res.AckLosses
		tot.Fallbacks += res.Fallbacks
		tot.Chains += res.Chains
		tot.Recoveries += res.Recoveries
		tot.Fillers += res.Fillers
		tot.Refused += res.Refused
		tot.ResetRounds += res.ResetRounds
		tot.NotificationsResent += res.NotificationsResent
		tot.CtlDrops += res.CtlDrops
		tot.Ineligible += res.Ineligible
		tot.MaxQueue = max(tot.MaxQueue, res.MaxQueue)
		tot.MaxCQQueue = max(tot.MaxCQQueue, res.MaxCQQueue)
		tot.WRITE += res.WRITE
		tot.SEND += res.SEND
		tot.READ += res.READ
		tot.FAA += res.FAA
		tot.CAS += res.CAS
		tot.Inline += res.Inline
		tot.Virtual += res.Virtual
		tot.Faults.add(res.Faults)
		tot.LinkEvents += res.LinkEvents
		tot.LinkFallbacks += res.LinkFallbacks
		tot.LinkUpProbes += res.LinkUpProbes
		tot.Queries += res.Queries
		tot.Stops += res.Stops
		tot.Destroys += res.Destroys
		if res.RecvOnly {
			recvOnly++
		}
		if res.Access != 0 {
			restricted++
		}
		if res.Deep {
			deep++
		}
	}
	el := time.Since(start)
	if n > heapMark {
		t.Logf("live heap: %d bytes after seed %d, %d after seed %d", heap0, heapMark, liveHeap(), n)
		if err := heapGrowth(heap0, n-heapMark); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d seeds in %v (%.0f seeds/s): %d steps, %d posts (WRITE %d, SEND/WRITE_IMM %d, READ %d, FETCH_ADD %d, CMP_SWAP %d; %d inline, %d ineligible), %d link downs (%d past the RC reach), %d ACK-loss bursts, %d error completions, %d fallbacks (%d refused), %d chains, %d recoveries, %d fillers, %d reset rounds, %d control messages dropped, %d notifications sent again, %v virtual; largest failover queue %d (QP), %d (CQ)",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), tot.Steps, tot.Posts, tot.WRITE, tot.SEND, tot.READ, tot.FAA, tot.CAS, tot.Inline, tot.Ineligible, tot.LinkDowns, tot.LongDowns, tot.AckLosses, tot.Errors, tot.Fallbacks, tot.Refused, tot.Chains, tot.Recoveries, tot.Fillers, tot.ResetRounds, tot.CtlDrops, tot.NotificationsResent, tot.Virtual, tot.MaxQueue, tot.MaxCQQueue)
	if fo {
		t.Logf("faults: %v; %d link events read, %d fallbacks they started, %d probes brought forward; %d runs with a receive-only QP, %d with restricted remote access, %d with deep receive queues; %d queries, %d QPs stopped by the application (%d then destroyed)", tot.Faults, tot.LinkEvents, tot.LinkFallbacks, tot.LinkUpProbes, recvOnly, restricted, deep, tot.Queries, tot.Stops, tot.Destroys)
	}
}

// The same seed gives the same trace; another seed another one. Over both layers; the
// failover layer's seeds include fallbacks (1: two, 5: four, 41: six), which the test checks,
// and 44 a fallback refused for an unsafe WR besides two that went through (its errors and
// the draws of risky.go's own stream): a change of the workload or of the fault mix may need
// other seeds here.
func TestDeterministic(t *testing.T) {
	for _, fo := range []bool{false, true} {
		seeds := []uint64{3, 17, 1234}
		if fo {
			seeds = []uint64{1, 5, 41, 44}
		}
		for _, seed := range seeds {
			a, err := Run(Config{Seed: seed, Failover: fo})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Run(Config{Seed: seed, Failover: fo})
			if err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Errorf("seed %d (failover %v): two runs differ:\n%+v\n%+v", seed, fo, a, b)
			}
			if fo && a.Fallbacks == 0 {
				t.Errorf("seed %d: no fallback, so nothing of the failover layer's was compared", seed)
			}
			if fo && seed == 44 && (a.Refused == 0 || a.Errors == 0) {
				t.Errorf("seed 44: %d refused fallbacks, %d error completions: the boundary's errors were not compared", a.Refused, a.Errors)
			}
			c, err := Run(Config{Seed: seed + 1, Failover: fo})
			if err != nil {
				t.Fatal(err)
			}
			if c.Trace == a.Trace {
				t.Errorf("seeds %d and %d (failover %v) gave the same trace %#x", seed, seed+1, fo, a.Trace)
			}
		}
	}
	// Recovery with two backups re-arms dead backup sets: seeds 71 and 79 differed from run to
	// run while the failover layer walked its QPs in a map's order (liveQPs.all).
	for _, seed := range []uint64{71, 79} {
		cfg := Config{Seed: seed, Failover: true, Recovery: true, Backups: 2}
		a, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			b, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Errorf("seed %d (recovery, two backups): two runs differ:\n%+v\n%+v", seed, a, b)
			}
		}
		if a.Chains == 0 {
			t.Errorf("seed %d: no chain, so no re-arm was compared", seed)
		}
	}
}

// TestReplay runs the seed in SHIFT_SIM_SEED, over the failover layer when SHIFT_SIM_FAILOVER
// is 1, with recovery when it is "recovery" (the command a failure prints).
func TestReplay(t *testing.T) {
	seed, err := strconv.ParseUint(os.Getenv("SHIFT_SIM_SEED"), 10, 64)
	if err != nil {
		t.Skip("SHIFT_SIM_SEED names no seed to replay")
	}
	fo := os.Getenv("SHIFT_SIM_FAILOVER")
	bks, _ := strconv.Atoi(os.Getenv("SHIFT_SIM_BACKUPS"))
	drop, _ := strconv.Atoi(os.Getenv("SHIFT_SIM_CTLDROP"))
	shapes := os.Getenv("SHIFT_SIM_SHAPES") == "1"
	res, err := Run(Config{Seed: seed, Failover: fo == "1" || fo == "recovery", Recovery: fo == "recovery", Backups: bks, CtlDrop: drop, Shapes: shapes})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
}

// Recovery seeds that failed over two faults of the simulator's own model, not of the
// failover layer (fixed in sim.go, ackLoss and the storm's end in run):
//
//   - 52, 63: a burst of lost ACKs was a count armed until that many ACKs went out; on an
//     idle backup path it waited for the ACKs of a lone fence WR's retransmissions, 17 ms
//     apart, and with a short link down and the random loss all 8 tries of the 134 ms reach
//     were lost, although the peer's backup QP ACKed every one ("backup QP 0x100 (backup 0)
//     failed: transport retry counter exceeded" in WaitDrained). A burst now lasts ackBurst.
//   - 146: "work left without a completion" after 500,000 steps, QPs still recovering; it
//     passes with the first fix alone (a probe is a lone WR too, and each lost probe costs
//     the 134 ms reach and a reset round).
//   - 514 (once the first was fixed): the faults never stopped while the run waited for
//     every QP to be back on its default NIC with every link up; the budget ran out inside
//     a default NIC's long down, recoveries in flight, each with a pending timer. The storm
//     now ends halfway through the budget.
//
// Each must recover: every QP back on its default NIC by the end (Run checks it).
func TestRecoveryFaultModelSeeds(t *testing.T) {
	for _, seed := range []uint64{52, 63, 146, 514} {
		res, err := Run(Config{Seed: seed, Failover: true, Recovery: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Fallbacks == 0 || res.Recoveries == 0 {
			t.Errorf("seed %d: %d fallbacks, %d recoveries: the seed no longer exercises recovery", seed, res.Fallbacks, res.Recoveries)
		}
	}
}

// Recovery with two backups, seed 1943: the chained failure's first long down fell on a link a
// short down held, down skipped it, no fallback came, and the workload posted until the step
// budget ran out. The chain's first down now waits for the link to come up (chainFirst). Scans
// of the mode with that alone hung on some seeds (80 the first, by the goroutines' timing, not
// the seed's): at a CQ's destroy the emulator withdrew the unread async events while its event
// writer, blocked on a full socket, refilled it between withdraw's drain and its wait (fixed
// in mlx5/emu, eventq.go, with its test; the stepped context never reads the async file, and
// a run with two backups and recovery leaves tens of events there, while the socket holds
// about ten unread, net.unix.max_dgram_qlen).
func TestRecoveryTwoBackupsSeeds(t *testing.T) {
	for _, seed := range []uint64{1943} {
		res, err := Run(Config{Seed: seed, Failover: true, Recovery: true, Backups: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Chains == 0 || res.Recoveries == 0 {
			t.Errorf("seed %d: %d chains, %d recoveries: the seed no longer exercises a chain and its recovery", seed, res.Chains, res.Recoveries)
		}
	}
}

// Runs in which a QP waited for its HandshakeTimeout (2 s here; most runs take 0.1-0.3 s of
// virtual time), found by scanning the 10,000 failover seeds for runs of more than 1.5 s:
//
//   - seed 58 (two backups): one host's endpoint on the first backup failed (its
//     notification met that backup's long down) and was re-armed once the link returned; the
//     peer replaced its own endpoint on seeing the new generation while one of its
//     notifications was still being retried on the old one, and the old QP's destroy dropped
//     it: neither delivered nor failed. The QPs of messages lost so are now told as if
//     flushed (failover/rearm.go, lostOnReplace).
//   - seeds 90 and 5154 (two backups): a QP whose fallback was refused answered its peer's
//     notification with a refusal, which its first backup's long down lost (the endpoint
//     failed with retry exceeded); a failed QP does not chain (in 5154 the application then
//     destroyed it), so nothing told the peer. Seeds 6014 and 7342: a QP's reply was lost so,
//     and the application then stopped the QP (6014: and destroyed it). Such messages are now
//     answered again on another endpoint towards the peer (failover/ctlep.go,
//     resendRefusals).
//   - seed 270 (two backups): a backup NIC hung before the round that ran on it; its
//     notification was neither sent nor failed, and no data WR was due there. The watchdog
//     now watches the control endpoints too (failover/watchdog_ctl.go).
//   - seed 1554 (two backups): a refusal went out on a backup NIC that then died; a dead
//     device neither sends nor fails it. A device taken for dead now has its endpoints'
//     messages answered as lost ones (failover/bkdead.go, chainOffDead).
//   - seed 1801 (one backup): the QP failed at once on the peer's refusal, but its handshake
//     timer stayed armed and the run ended when it fired (failOnLocked now stops it).
func TestHandshakeTimeoutSeeds(t *testing.T) {
	for _, c := range []Config{
		{Seed: 58, Failover: true, Backups: 2}, {Seed: 90, Failover: true, Backups: 2},
		{Seed: 5154, Failover: true, Backups: 2}, {Seed: 6014, Failover: true, Backups: 2},
		{Seed: 7342, Failover: true, Backups: 2}, {Seed: 270, Failover: true, Backups: 2},
		{Seed: 1554, Failover: true, Backups: 2}, {Seed: 1801, Failover: true},
	} {
		res, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Chains == 0 && res.RefusalsResent == 0 && res.Refused == 0 {
			t.Errorf("seed %d: no chain, refusal or refusal sent again: the seed no longer exercises what it did", c.Seed)
		}
		if res.Virtual >= time.Second || res.NotificationsResent != 0 {
			t.Errorf("seed %d: the run took %v of virtual time and sent %d notifications again: a QP waited for a reply that was lost (HandshakeTimeout 2 s)",
				c.Seed, res.Virtual, res.NotificationsResent)
		}
	}
}

// TestCtlDropSeeds replays runs with a dropped control message (ctldrop.go) that found a bug:
//
//   - 19 (recovery, the fourth message dropped: the reply to a reset round): each side took
//     the other's next reset-round notification for a crossing one, which nobody answered,
//     and the two waited for each other for ever, one incarnation apart, each failed probe
//     starting the next round (fixed: crossing notifications are answered too, and a reply
//     that takes no later incarnation is dropped; failover/fallback.go).
func TestCtlDropSeeds(t *testing.T) {
	for _, c := range []Config{{Seed: 19, Failover: true, Recovery: true, CtlDrop: 4}} {
		res, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if res.CtlDrops != 1 {
			t.Errorf("seed %d: %d control messages dropped, want 1: the seed no longer exercises what it did", c.Seed, res.CtlDrops)
		}
	}
}

// TestStoppedPeerSeeds replays two recovery seeds beyond the 10,000 TestFailoverSeeds runs
// (found by a run of 20,000) in which the application stops a QP and the run then waited
// for ever, on the simulation's side:
//
//   - 12459: the stopped QP's peer is receive-only; nothing brings it back from the backup,
//     and it must end there without an error (quiet);
//   - 17039 (two backups): a backup NIC's death waited for a fallback, which the stop, before
//     any failure, left none to run (backupKillStep).
//
// and one that the second change made possible, a SHIFT bug: 24210 (two backups, no
// recovery), a backup NIC dies and the application stops and destroys a QP whose receives
// were on it; their flushes reached the application from the backup CQ and were completed
// again by flushDeadSetLocked, after the destroy (failover/cq.go pollBackupDevLocked).
// Two more from seeds 35,000–50,000: 42791 (two backups, recovery), the application stops a
// QP whose default NIC died and got EIO from the emulator (which now fakes the move to ERR,
// as mlx5's command layer does); 47255 (the same mode), the stopped QP's last WR was an
// unsignaled SEND the NIC had executed, which no completion ever reports (unsignaledOnly).
// And from seeds 50,000–70,000, a SHIFT bug: 63454 (two backups), the application stops a
// QP, its default NIC flushes the WRs and dies before the last flush is polled, and SHIFT's
// flush for the dead NIC completed that WR again (failover/deadflush.go). From seeds
// 90,000–105,000, a SHIFT bug: 95126 (two backups), the application stops a QP during a
// reset round on its first backup, whose NIC hangs; the peer's chain notification then moved
// the failed QP to the second backup, whose drain of the first dropped as the set's what the
// application waited for, and 16 sends never completed (failover/fallback.go onControl).
// With the application shapes (deep.go), seeds 10,001–30,000 found a SHIFT bug: 29616 (one
// backup, deep receive queues), the application stops its QP in WaitDrained, and the READ it
// had posted behind the recovery fence, written on the default QP with the doorbell
// withheld, never completed (failover/stopwithheld.go). With its schedule moved (by a change
// of 2026-11-30 that kicked the engine from inside its own drains, not kept) it found a
// second: the stopped QP's completions passed through to the application, the flush of
// SHIFT's control RECV (left on the default QP for the peer's recovery notification) among
// them, and the application polled it after the QP's destroy (failover/cq.go,
// defPassThrough; failover TestApplicationModifyErr/recovered).
func TestStoppedPeerSeeds(t *testing.T) {
	for _, c := range []Config{{Seed: 12459, Failover: true, Recovery: true}, {Seed: 17039, Failover: true, Recovery: true, Backups: 2},
		{Seed: 24210, Failover: true, Backups: 2}, seedConfig(42791, true), seedConfig(47255, true),
		seedConfig(63454, true), seedConfig(95126, true), {Seed: 29616, Failover: true, Shapes: true}} {
		res, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stops == 0 {
			t.Errorf("seed %d: no QP stopped: the seed no longer exercises what it did", c.Seed)
		}
	}
}

// TestRefusedOrderSeeds replays 66891 (recovery; from seeds 50,001–70,000 with the shapes,
// which this seed does not draw: it failed on older trees too). The peer refused a fallback
// (an ineligible WR outstanding on its side) of a QP that had sends on its backup QP and,
// after them, sends on its default QP again; the refusal completed the default's at once,
// and the backup's flushes came after them: "completion for wr_id 228, not outstanding"
// (failover/stopwithheld.go: they now wait for the backup log).
func TestRefusedOrderSeeds(t *testing.T) {
	res := runShaped(t, 66891)
	if res.Refused == 0 {
		t.Errorf("seed %d: no fallback refused: the seed no longer exercises what it did", res.Seed)
	}
}

// TestPeerFailedSeeds replays 110095 (recovery, two backups, dropped control messages; from
// seeds 90,001–130,000 with the shapes; it fails on the sixth stop of 2026-11-29 too): a QP's
// handshake got no reply within HandshakeTimeout (the notification and its second sending
// dropped), so SHIFT failed it, and its peer, with nothing of its own outstanding, stayed on
// the backup for good, its probes failing against a default QP in ERR. That is RC's rule (a
// QP learns of its peer's failure only when it sends), not a SHIFT bug: the run's end no
// longer waits for a QP whose peer failed to come back (runner.quiet). And 231931, below.
func TestPeerFailedSeeds(t *testing.T) {
	c := seedConfig(110095, true)
	c.Shapes = true
	if !c.Recovery || c.Backups != 2 || c.CtlDrop == 0 {
		t.Fatalf("seed %d draws %+v, no longer recovery with two backups and dropped control messages", c.Seed, c)
	}
	if _, err := Run(c); err != nil {
		t.Fatal(err)
	}
	// 231931 (recovery; from seeds 230,001–250,000 with the shapes): the application stopped
	// host 0's QP with nothing posted on it, so no flush marked it failed, and its peer, a
	// receive-only QP, stayed on the backup as RC's rule has it; the run waited for it.
	res := runShaped(t, 231931)
	if !res.RecvOnly || res.Stops == 0 {
		t.Errorf("seed %d: receive-only %v, %d stops: the seed no longer exercises what it did", res.Seed, res.RecvOnly, res.Stops)
	}
}

// TestTrackedAtomicSeeds replays 136472 (one backup, dropped control messages; from seeds
// 130,001–150,000 with the shapes), a SHIFT bug: a QP whose sends were back on its default QP
// while its peer's were still on the backup (its completions classified by position) lost the
// network error of a FETCH_AND_ADD whose retries ran out, and the fallback that atomic
// refused then failed the QP without ever completing it (failover/cq.go,
// classifyTrackedLocked; failover TestAtomicNotRetriedAfterRecovery).
func TestTrackedAtomicSeeds(t *testing.T) {
	c := seedConfig(136472, true)
	c.Shapes = true
	if c.Backups > 1 || c.CtlDrop == 0 {
		t.Fatalf("seed %d draws %+v, no longer one backup with dropped control messages", c.Seed, c)
	}
	res, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Refused == 0 || res.FAA == 0 || res.Recoveries == 0 {
		t.Errorf("seed %d: %d refused, %d FETCH_AND_ADDs, %d recoveries: the seed no longer exercises what it did", c.Seed, res.Refused, res.FAA, res.Recoveries)
	}
}

// TestLongPauseBudgetSeeds replays 169959 (recovery, two backups; from seeds
// 150,001–170,000 with the shapes), a simulation finding, not a SHIFT bug: the run's 500,000
// steps ran out inside host 0's long pause (2.1–3 s of virtual time; the other host's probes
// and late CQEs used the steps up in 2.23 s), its completions waiting in its CQs for an
// application that was not running. The budget now waits for a paused host and gives it
// half a budget once it resumes (pause.go, pauseEnded).
func TestLongPauseBudgetSeeds(t *testing.T) {
	res := runShaped(t, 169959)
	if res.Faults.LongPauses == 0 || res.Steps <= 500_000 {
		t.Errorf("seed %d: %d long pauses, %d steps: the seed no longer exercises what it did", res.Seed, res.Faults.LongPauses, res.Steps)
	}
}

// TestReceiveOnlySeeds replays 107651 (recovery; from seeds 105,000–120,000, beyond the
// tested range), a SHIFT bug: a receive-only QP's receive side came back while a filler of
// its was still on the backup, so its send side did not return with it (nothing it sent may
// be in flight then), and nothing looked again once the filler completed: both QPs stayed off
// their default paths for good (failover/recvonly.go, neverSentDue). And 302807 (recovery,
// two backups; from seeds 285,000–305,000): the receive-only QP's control endpoint, connected
// from RTR without the connection's timeout, took the default 537 ms of retry reach, so the
// control watchdog needed 1.07 s to find its backup NIC hung as the peer's notification
// (its first one dropped) arrived again halfway through the peer's 2 s HandshakeTimeout; the
// peer gave up first and its QP failed (failover/ctlep.go, ctlTimeout).
func TestReceiveOnlySeeds(t *testing.T) {
	for _, c := range []Config{seedConfig(107651, true), seedConfig(302807, true)} {
		res, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if !res.RecvOnly || res.Recoveries == 0 {
			t.Errorf("seed %d: receive-only %v, %d recoveries: the seed no longer exercises what it did", c.Seed, res.RecvOnly, res.Recoveries)
		}
		if c.Seed == 302807 && (res.Faults.BackupHangs == 0 || res.CtlDrops == 0) {
			t.Errorf("seed %d: %v, %d control messages dropped: the seed no longer exercises what it did", c.Seed, res.Faults, res.CtlDrops)
		}
	}
}
