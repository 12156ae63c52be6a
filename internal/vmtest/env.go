package vmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Environment variables the harness reads.
const (
	// EnvVM selects the tier: "0" skips it, "1" requires it (a missing prerequisite fails
	// instead of skipping), unset or anything else runs it when possible.
	EnvVM = "SHIFT_VM"
	// EnvCache is the cache directory for the kernel package.
	EnvCache = "SHIFT_VM_CACHE"
	// EnvAccel forces the accelerator: "tcg", "kvm" or "auto" (the default).
	EnvAccel = "SHIFT_VM_ACCEL"
	// EnvKernelPkg names the Debian kernel package to use instead of the one
	// linux-image-amd64 depends on.
	EnvKernelPkg = "SHIFT_VM_KERNEL_PKG"
	// EnvTimeout overrides Config.Timeout (a Go duration such as "10m").
	EnvTimeout = "SHIFT_VM_TIMEOUT"
)

// required reports whether SHIFT_VM=1 asks for the tier to run or fail.
func required() bool { return os.Getenv(EnvVM) == "1" }

// unavailable skips the test because a prerequisite is missing, or fails it when SHIFT_VM=1.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("vmtest: %s (and %s=1 requires the VM tier)", msg, EnvVM)
	}
	t.Skipf("vmtest: skipping the real-kernel tier: %s", msg)
}

// cacheDir returns SHIFT_VM_CACHE, else $XDG_CACHE_HOME/shift-vm, else ~/.cache/shift-vm.
func cacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "shift-vm"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("vmtest: no cache directory: set %s: %w", EnvCache, err)
	}
	return filepath.Join(home, ".cache", "shift-vm"), nil
}

// timeoutFor applies SHIFT_VM_TIMEOUT to the configured timeout.
func timeoutFor(configured time.Duration) (time.Duration, error) {
	s := os.Getenv(EnvTimeout)
	if s == "" {
		return configured, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("vmtest: %s=%q: want a positive Go duration", EnvTimeout, s)
	}
	return d, nil
}
