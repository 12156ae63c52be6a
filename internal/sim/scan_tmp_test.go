package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestScanTmp(t *testing.T) {
	r := os.Getenv("SCAN")
	if r == "" {
		t.Skip()
	}
	a, b, _ := strings.Cut(r, "-")
	from, _ := strconv.ParseUint(a, 10, 64)
	to, _ := strconv.ParseUint(b, 10, 64)
	f, _ := os.Create(os.Getenv("SCANLOG"))
	defer f.Close()
	for seed := from; seed <= to; seed++ {
		fmt.Fprintf(f, "start %d\n", seed)
		t0 := time.Now()
		res, err := Run(Config{Seed: seed, Failover: true, Recovery: true, Backups: 2})
		el := time.Since(t0)
		if el > 500*time.Millisecond || err != nil {
			fmt.Fprintf(f, "SLOW seed %d %v steps %d virt %v fb %d ch %d rec %d err %v\n", seed, el, res.Steps, res.Virtual, res.Fallbacks, res.Chains, res.Recoveries, err)
		}
	}
	fmt.Fprintf(f, "done\n")
}
