package vmtest

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestVMHarness proves the harness on its own, whatever state the packages under test are
// in: the guest comes up with rxe0; a static Go binary of this repository (testdata/vm/
// guestprobe) opens the uverbs character device and matches it with sysfs; rdma-core's
// ibv_devinfo, with its shared libraries and the rxe provider shipped by the harness, sees
// rxe0 and ibv_rc_pingpong runs an RC loopback over it; and a deliberately failing command
// whose output lacks a final newline comes back with its exit code and output, so the
// harness is shown not to pass everything.
func TestVMHarness(t *testing.T) {
	// The RC loopback's server must listen before the client connects; the client retries
	// for up to 10 s instead of guessing a delay, and timeout bounds both sides.
	const pingpong = `timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -n 100 & srv=$!
i=0; until timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -n 100 127.0.0.1; do
  i=$((i+1)); [ $i -lt 50 ] || exit 1; sleep 0.2; done
wait $srv`
	start := time.Now()
	probe := BuildBinary(t, "./testdata/vm/guestprobe")
	res := Run(t, Config{
		Tools: []string{"ibv_devinfo", "ibv_rc_pingpong"},
		Commands: []Command{
			{Name: "ibv_devinfo", Argv: []string{"ibv_devinfo", "-d", "rxe0"}},
			{Name: "ibv_rc_pingpong", Argv: []string{"sh", "-c", pingpong}},
			{Name: "harness-selfcheck", Argv: []string{"sh", "-c", "printf 'deliberate failure'; exit 3"}},
		},
		Binaries: []Binary{{Name: "guestprobe", Path: probe, Env: []string{"GUESTPROBE_TAG=it's env"}}},
	})
	Logf(t, "guest: kernel %s, accel %s, initramfs %.1f MiB", res.Kernel, res.Accel, float64(res.InitramfsBytes)/(1<<20))
	for _, s := range res.Setup {
		if s.Name == "device" {
			for _, l := range s.Output {
				Logf(t, "guest: %s", l)
			}
		}
	}
	self, _ := res.Step("harness-selfcheck")
	if !self.Finished || self.ExitCode != 3 || len(self.Output) != 1 || self.Output[0] != "deliberate failure" {
		t.Errorf("harness self-check: want exit 3 and one line of output, got %+v", self)
	}
	gp, _ := res.Step("guestprobe")
	for _, l := range gp.Output {
		Logf(t, "guest: %s", l)
	}
	if !gp.Passed() || !strings.Contains(strings.Join(gp.Output, "\n"), "/dev/infiniband/uverbs0 -> rxe0") {
		t.Errorf("guestprobe: ran=%v exit=%d, want uverbs0 -> rxe0 opened", gp.Ran, gp.ExitCode)
	}
	if !slices.Contains(gp.Output, `guestprobe: tag "it's env"`) {
		t.Errorf("guestprobe did not see its Env entry")
	}
	dev, _ := res.Step("ibv_devinfo")
	out := strings.Join(dev.Output, "\n")
	for _, l := range dev.Output {
		t.Logf("guest ibv_devinfo: %s", l)
	}
	if !dev.Passed() || !strings.Contains(out, "hca_id:\trxe0") || !strings.Contains(out, "PORT_ACTIVE") {
		t.Errorf("ibv_devinfo -d rxe0 in the guest: exit %d, want rxe0 with an active port", dev.ExitCode)
	} else {
		Logf(t, "guest: ibv_devinfo -d rxe0: hca_id rxe0, port 1 PORT_ACTIVE")
	}
	pp, _ := res.Step("ibv_rc_pingpong")
	for _, l := range pp.Output {
		t.Logf("guest ibv_rc_pingpong: %s", l)
	}
	if !pp.Passed() || !strings.Contains(strings.Join(pp.Output, "\n"), "100 iters") {
		t.Errorf("ibv_rc_pingpong loopback over rxe0: exit %d, want 100 iterations each way", pp.ExitCode)
	} else {
		Logf(t, "guest: ibv_rc_pingpong RC loopback over rxe0 (GID 1): 100 iterations each way")
	}
	Logf(t, "boot to /init %.2fs (guest uptime), QEMU wall %.2fs, test wall including build %.2fs",
		res.Boot.Seconds(), res.Wall.Seconds(), time.Since(start).Seconds())
}
