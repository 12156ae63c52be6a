package vmtest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingTB is a testing.TB whose Skip and Fatal end the calling goroutine, as the real
// ones do, but record the outcome so a test can check how Run reacted.
type recordingTB struct {
	testing.TB
	mu      sync.Mutex
	skipped string
	fatal   string
	cleanup []func()
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recordingTB) Skip(args ...any) { r.Skipf("%s", fmt.Sprint(args...)) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recordingTB) Fatal(args ...any)       { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *recordingTB) Cleanup(f func())        { r.cleanup = append(r.cleanup, f) }
func (r *recordingTB) Log(args ...any)         { r.TB.Log(args...) }
func (r *recordingTB) Logf(f string, a ...any) { r.TB.Logf(f, a...) }

// runRecorded calls Run in its own goroutine (Skip and Fatal end it) and runs the
// registered cleanups afterwards, as the testing package would.
func runRecorded(t *testing.T, cfg Config) *recordingTB {
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(rec, cfg)
	}()
	<-done
	for i := len(rec.cleanup) - 1; i >= 0; i-- {
		rec.cleanup[i]()
	}
	return rec
}

func TestRunSkipsAndRequires(t *testing.T) {
	t.Setenv(EnvVM, "0")
	if rec := runRecorded(t, Config{}); !strings.Contains(rec.skipped, "SHIFT_VM=0") || rec.fatal != "" {
		t.Errorf("SHIFT_VM=0: skipped %q fatal %q", rec.skipped, rec.fatal)
	}
	// An empty PATH hides qemu-system-x86_64: a skip that names it, or a failure under SHIFT_VM=1.
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvVM, "")
	if testing.Short() {
		t.Skip("Run skips everything in -short mode before looking for QEMU")
	}
	if rec := runRecorded(t, Config{}); !strings.Contains(rec.skipped, "qemu-system-x86_64 not found") {
		t.Errorf("no QEMU: skipped %q fatal %q", rec.skipped, rec.fatal)
	}
	t.Setenv(EnvVM, "1")
	if rec := runRecorded(t, Config{}); !strings.Contains(rec.fatal, "qemu-system-x86_64 not found") || rec.skipped != "" {
		t.Errorf("no QEMU with SHIFT_VM=1: skipped %q fatal %q", rec.skipped, rec.fatal)
	}
}

// TestVMTimeout boots a guest whose command never ends and checks that Run fails with the
// timeout named and that QEMU is gone afterwards.
func TestVMTimeout(t *testing.T) {
	t.Setenv(EnvTimeout, "")
	start := time.Now()
	rec := runRecorded(t, Config{
		Timeout:  12 * time.Second,
		Commands: []Command{{Name: "hang", Argv: []string{"sleep", "3600"}}},
	})
	if rec.skipped != "" {
		t.Skip(rec.skipped)
	}
	if !strings.Contains(rec.fatal, "did not finish within 12s") {
		t.Errorf("hanging guest: fatal %q, want the timeout named", rec.fatal)
	}
	if left := qemuChildren(); len(left) > 0 {
		t.Errorf("QEMU still running after a timed-out run: %v", left)
	}
	t.Logf("timed-out run returned after %.1fs", time.Since(start).Seconds())
}
