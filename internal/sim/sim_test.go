package sim

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// seeds is how many seeds TestSeeds runs: SHIFT_SIM_SEEDS, or 10,000.
func seeds() int {
	if n, err := strconv.Atoi(os.Getenv("SHIFT_SIM_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 10000
}

// TestSeeds runs many seeds; any broken invariant fails with the replay command.
func TestSeeds(t *testing.T) {
	n := seeds()
	start := time.Now()
	var tot Result
	for seed := uint64(1); seed <= uint64(n); seed++ {
		res, err := Run(Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		tot.Steps += res.Steps
		tot.Posts += res.Posts
		tot.Errors += res.Errors
		tot.LinkDowns += res.LinkDowns
		tot.LongDowns += res.LongDowns
		tot.AckLosses += res.AckLosses
		tot.WRITE += res.WRITE
		tot.SEND += res.SEND
		tot.READ += res.READ
		tot.FAA += res.FAA
		tot.Virtual += res.Virtual
	}
	el := time.Since(start)
	t.Logf("%d seeds in %v (%.0f seeds/s): %d steps, %d posts (WRITE %d, SEND/WRITE_IMM %d, READ %d, FETCH_ADD %d), %d link downs (%d past the RC reach), %d ACK-loss bursts, %d error completions, %v virtual",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), tot.Steps, tot.Posts, tot.WRITE, tot.SEND, tot.READ, tot.FAA, tot.LinkDowns, tot.LongDowns, tot.AckLosses, tot.Errors, tot.Virtual)
}

// The same seed gives the same trace; another seed another one.
func TestDeterministic(t *testing.T) {
	for _, seed := range []uint64{3, 17, 1234} {
		a, err := Run(Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("seed %d: two runs differ:\n%+v\n%+v", seed, a, b)
		}
		c, err := Run(Config{Seed: seed + 1})
		if err != nil {
			t.Fatal(err)
		}
		if c.Trace == a.Trace {
			t.Errorf("seeds %d and %d gave the same trace %#x", seed, seed+1, a.Trace)
		}
	}
}

// TestReplay runs the seed in SHIFT_SIM_SEED (the command a failure prints).
func TestReplay(t *testing.T) {
	seed, err := strconv.ParseUint(os.Getenv("SHIFT_SIM_SEED"), 10, 64)
	if err != nil {
		t.Skip("SHIFT_SIM_SEED names no seed to replay")
	}
	res, err := Run(Config{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
}
