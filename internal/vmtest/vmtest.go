package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Run boots a guest as cfg describes, runs its commands and binaries, and returns what each
// did. It skips t when a prerequisite is missing (see the package documentation) and fails t
// when the guest does not boot, rxe0 cannot be created, or the run does not finish within
// the timeout. A step that exits non-zero does not fail t: the caller judges its Result.
func Run(t testing.TB, cfg Config) *Result {
	t.Helper()
	if os.Getenv(EnvVM) == "0" {
		t.Skipf("vmtest: skipping the real-kernel tier: %s=0", EnvVM)
	}
	if testing.Short() && !required() {
		t.Skip("vmtest: skipping the real-kernel tier in -short mode")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		unavailable(t, "the guest is linux/amd64 and needs a linux/amd64 host, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	cfg, err := cfg.normalize()
	if err != nil {
		t.Fatal(err)
	}
	timeout, err := timeoutFor(cfg.Timeout)
	if err != nil {
		t.Fatal(err)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		unavailable(t, "qemu-system-x86_64 not found (install qemu-system-x86)")
	}
	accel, err := chooseAccel()
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cacheDir()
	if err != nil {
		t.Fatal(err)
	}
	k, err := fetchKernel(cache)
	if errors.Is(err, errNoKernel) {
		unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	initrd := filepath.Join(dir, "initramfs.cpio")
	size, err := buildInitramfs(k, cfg, initrd)
	if errors.Is(err, errPrereq) {
		unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	image := k.bzImage
	if k.vmlinux != "" {
		image = k.vmlinux
	}
	proto := filepath.Join(dir, "protocol.log")
	consolePath := filepath.Join(dir, "console.log")
	console, err := os.Create(consolePath)
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, qemuArgs(accel, image, initrd, proto, cfg)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = console, &stderr
	// QEMU dies with the test process even if the test binary is killed mid-run. Linux sends
	// the death signal when the forking thread exits, so this goroutine keeps its thread
	// until QEMU has been waited for.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 10 * time.Second
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("vmtest: start %s: %v", qemu, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	waitErr := cmd.Wait()
	r := &Result{Kernel: k.version, Accel: accel, Wall: time.Since(start), InitramfsBytes: size}
	cons, _ := os.ReadFile(consolePath)
	r.Console = strings.ReplaceAll(string(cons), "\r", "")
	out, _ := os.ReadFile(proto)
	names := make([]string, 0, len(cfg.Commands)+len(cfg.Binaries))
	for _, c := range cfg.Commands {
		names = append(names, c.Name)
	}
	for _, b := range cfg.Binaries {
		names = append(names, b.Name)
	}
	if err := parseProtocol(r, string(out), names); err != nil {
		t.Fatalf("%v\n%s", err, r.diagnostics(stderr.String()))
	}
	finished := "did not finish"
	if r.Done {
		finished = fmt.Sprintf("steps done at %.2fs", r.GuestTime.Seconds())
	}
	t.Logf("vmtest: kernel %s, accel %s, initramfs %.1f MiB, /init at %.2fs guest uptime, %s, QEMU wall %.2fs",
		r.Kernel, r.Accel, float64(size)/(1<<20), r.Boot.Seconds(), finished, r.Wall.Seconds())
	if ctx.Err() != nil {
		t.Fatalf("vmtest: guest did not finish within %v (set %s to allow more)\n%s", timeout, EnvTimeout, r.diagnostics(stderr.String()))
	}
	if !r.Done {
		t.Fatalf("vmtest: guest stopped before the end of /init (qemu: %v)\n%s", waitErr, r.diagnostics(stderr.String()))
	}
	for _, s := range r.Setup {
		if !s.Passed() {
			t.Fatalf("vmtest: guest setup step %s failed (exit %d):\n%s\n%s", s.Name, s.ExitCode,
				strings.Join(s.Output, "\n"), r.diagnostics(stderr.String()))
		}
	}
	return r
}

// diagnostics is what a failure report shows: the tails of QEMU's stderr, the kernel
// console and the protocol.
func (r *Result) diagnostics(qemuStderr string) string {
	return fmt.Sprintf("--- qemu stderr:\n%s\n--- guest console (tail):\n%s\n--- guest protocol (tail):\n%s",
		tail(qemuStderr, 20), tail(r.Console, 40), tail(r.Protocol, 40))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
