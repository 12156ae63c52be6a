package vmtest

import (
	"strings"
	"testing"
	"time"
)

// TestVMUverbs is the real-kernel tier of package uverbs: it runs uverbs' TestKernel* tests
// in a guest where rdma_rxe provides /dev/infiniband/uverbs0, next to two smoke checks of
// the guest itself (rdma-core's ibv_devinfo opening rxe0, the uverbs character device) and a
// deliberately failing command that proves the harness reports exit codes instead of
// passing everything.
func TestVMUverbs(t *testing.T) {
	start := time.Now()
	bin := BuildTestBinary(t, "./uverbs")
	cfg := Config{
		Tools: []string{"ibv_devinfo"},
		Commands: []Command{
			{Name: "uverbs0-cdev", Argv: []string{"sh", "-c", "ls -l /dev/infiniband/ && test -c /dev/infiniband/uverbs0 && cat /sys/class/infiniband_verbs/abi_version"}},
			{Name: "ibv_devinfo", Argv: []string{"ibv_devinfo", "-d", "rxe0"}},
			{Name: "harness-selfcheck", Argv: []string{"sh", "-c", "echo deliberate failure; exit 3"}},
		},
	}
	if bin != "" {
		cfg.Binaries = []Binary{{Name: "uverbs.test", Path: bin, Args: []string{"-test.run", "Kernel", "-test.v"}}}
	} else {
		t.Log("package uverbs has no test files yet: running the guest smoke checks only")
	}
	res := Run(t, cfg)
	for _, s := range res.Setup {
		if s.Name == "device" || s.Name == "rxe" {
			for _, l := range s.Output {
				t.Logf("guest setup %s: %s", s.Name, l)
			}
		}
	}

	self, _ := res.Step("harness-selfcheck")
	if !self.Finished || self.ExitCode != 3 || len(self.Output) != 1 || self.Output[0] != "deliberate failure" {
		t.Errorf("harness self-check: want exit 3 and one line of output, got %+v", self)
	}
	for _, name := range []string{"uverbs0-cdev", "ibv_devinfo"} {
		s, _ := res.Step(name)
		for _, l := range s.Output {
			t.Logf("guest %s: %s", name, l)
		}
		if !s.Passed() {
			t.Errorf("guest smoke check %s: ran=%v exit=%d", name, s.Ran, s.ExitCode)
		}
	}
	if dev, _ := res.Step("ibv_devinfo"); !strings.Contains(strings.Join(dev.Output, "\n"), "hca_id:\trxe0") {
		t.Errorf("ibv_devinfo in the guest does not list rxe0")
	}

	if bin != "" {
		s, _ := res.Step("uverbs.test")
		for _, l := range s.Output {
			t.Logf("guest uverbs.test: %s", l)
		}
		rep := ParseGoTest(s.Output)
		switch {
		case !s.Ran || !s.Finished:
			t.Errorf("uverbs.test did not run to completion in the guest")
		case s.ExitCode != 0 || len(rep.Failed) > 0 || !rep.Ok:
			t.Errorf("uverbs.test failed in the guest: exit %d, failed %v", s.ExitCode, rep.Failed)
		case rep.NoTests:
			t.Logf("package uverbs has no TestKernel* tests yet: only the smoke checks verified the guest")
		case len(rep.Passed) == 0:
			t.Errorf("every TestKernel* test skipped in the guest, so the real kernel verified nothing: skipped %v", rep.Skipped)
		default:
			t.Logf("verified against the real kernel (%s): %s", res.Kernel, strings.Join(rep.Passed, ", "))
			if len(rep.Skipped) > 0 {
				t.Logf("skipped in the guest: %s", strings.Join(rep.Skipped, ", "))
			}
		}
	}
	t.Logf("boot to /init %.2fs (guest uptime), QEMU wall %.2fs, test wall including build %.2fs",
		res.Boot.Seconds(), res.Wall.Seconds(), time.Since(start).Seconds())
}
