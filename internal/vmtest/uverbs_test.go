package vmtest

import (
	"strings"
	"testing"
	"time"
)

// TestVMUverbs is the real-kernel tier of package uverbs: it runs uverbs' TestKernel* tests
// as a static binary in a guest where rdma_rxe provides /dev/infiniband/uverbs0, logs what
// they verified, and fails when the binary fails, does not run, or verifies nothing.
func TestVMUverbs(t *testing.T) {
	start := time.Now()
	bin := BuildTestBinary(t, "./uverbs")
	if bin == "" {
		t.Skip("package uverbs has no test files yet; TestVMHarness covers the guest")
	}
	res := Run(t, Config{
		Binaries: []Binary{{Name: "uverbs.test", Path: bin, Args: []string{"-test.run", "Kernel", "-test.v"}}},
	})
	s, _ := res.Step("uverbs.test")
	for _, l := range s.Output {
		Logf(t, "guest uverbs.test: %s", l)
	}
	rep := ParseGoTest(s.Output)
	switch {
	case !s.Ran || !s.Finished:
		t.Errorf("uverbs.test did not run to completion in the guest")
	case s.ExitCode != 0 || len(rep.Failed) > 0 || !rep.Ok:
		t.Errorf("uverbs.test failed in the guest: exit %d, failed %v", s.ExitCode, rep.Failed)
	case rep.NoTests:
		Logf(t, "package uverbs has no TestKernel* tests yet; TestVMHarness covers the guest")
		t.Skip("package uverbs has no TestKernel* tests yet")
	case len(rep.Passed) == 0:
		t.Errorf("every TestKernel* test skipped in the guest, so the real kernel verified nothing: skipped %v", rep.Skipped)
	default:
		Logf(t, "verified against the real kernel %s on rxe0: %s", res.Kernel, strings.Join(rep.Passed, ", "))
		if len(rep.Skipped) > 0 {
			Logf(t, "skipped in the guest: %s", strings.Join(rep.Skipped, ", "))
		}
	}
	Logf(t, "boot to /init %.2fs (guest uptime), QEMU wall %.2fs, test wall including build %.2fs",
		res.Boot.Seconds(), res.Wall.Seconds(), time.Since(start).Seconds())
}
