package sim

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScan runs the seeds SHIFT_SIM_SCAN names ("from-to"), in the mode SHIFT_SIM_FAILOVER and
// SHIFT_SIM_BACKUPS name as for TestReplay, or with SHIFT_SIM_FAILOVER=mix each seed as
// TestFailoverSeeds runs it (seedConfig: its backups, recovery and dropped control message
// drawn from the seed; Config.Shapes, as with any mode over the failover layer), and logs every seed that took more than a second of wall time with
// its steps and virtual time: how slow or hanging seeds of a mode are found (run it with -v,
// which logs as it goes, and a -timeout, whose goroutine dump shows a hang). A failing seed
// is reported with its replay command and the scan goes on, up to maxScanFailures.
func TestScan(t *testing.T) {
	from, to, ok := strings.Cut(os.Getenv("SHIFT_SIM_SCAN"), "-")
	a, err1 := strconv.ParseUint(from, 10, 64)
	b, err2 := strconv.ParseUint(to, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Skip("SHIFT_SIM_SCAN names no range of seeds (from-to)")
	}
	fo := os.Getenv("SHIFT_SIM_FAILOVER")
	bks, _ := strconv.Atoi(os.Getenv("SHIFT_SIM_BACKUPS"))
	start := time.Now()
	failed := 0
	for seed := a; seed <= b; seed++ {
		t0 := time.Now()
		cfg := Config{Seed: seed, Failover: fo == "1" || fo == "recovery", Recovery: fo == "recovery", Backups: bks}
		if fo == "mix" {
			cfg = seedConfig(seed, true)
		}
		cfg.Shapes = cfg.Failover // as TestFailoverSeeds runs them
		res, err := Run(cfg)
		if err != nil {
			t.Error(err)
			if failed++; failed == maxScanFailures {
				t.Fatalf("stopped at seed %d after %d failures", seed, failed)
			}
			continue
		}
		if el := time.Since(t0); el > time.Second {
			t.Logf("seed %d: %v, %d steps, %v virtual, %d fallbacks, %d chains, %d recoveries", seed, el.Round(time.Millisecond), res.Steps, res.Virtual, res.Fallbacks, res.Chains, res.Recoveries)
		}
	}
	t.Logf("seeds %d-%d in %v", a, b, time.Since(start).Round(time.Millisecond))
}

// maxScanFailures ends a scan that keeps failing (a broken build, not a rare seed).
const maxScanFailures = 5
