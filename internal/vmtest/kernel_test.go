package vmtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testKernel returns the cached kernel package, fetching it if needed, with the same skip
// rules as Run.
func testKernel(t *testing.T) *kernel {
	t.Helper()
	if os.Getenv(EnvVM) == "0" {
		t.Skipf("vmtest: %s=0", EnvVM)
	}
	if testing.Short() && !required() {
		t.Skip("vmtest: the kernel package is not fetched in -short mode")
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
	return k
}

// TestKernelPackageModules checks the module closure against the real kernel package, with
// kmod's modinfo (where installed) as an independent reader of the .modinfo sections.
func TestKernelPackageModules(t *testing.T) {
	k := testKernel(t)
	order, paths, err := moduleClosure(k.modDir, defaultModules)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s: load order %v", k.version, order)
	pos := map[string]int{}
	for i, m := range order {
		pos[m] = i
	}
	for _, m := range append([]string{"ib_core", "udp_tunnel"}, defaultModules...) {
		if _, ok := pos[m]; !ok {
			t.Errorf("closure lacks %s", m)
		}
	}
	modinfo, _ := exec.LookPath("modinfo")
	for _, m := range order {
		deps, err := modinfoDepends(filepath.Join(k.modDir, paths[m]))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps {
			if pos[d] >= pos[m] {
				t.Errorf("%s is loaded before its dependency %s", m, d)
			}
		}
		if modinfo == "" {
			continue
		}
		out, err := exec.Command(modinfo, "-F", "depends", filepath.Join(k.modDir, paths[m])).Output()
		if err != nil {
			t.Fatalf("modinfo %s: %v", m, err)
		}
		var want []string
		for _, d := range strings.Split(strings.TrimSpace(string(out)), ",") {
			if d != "" {
				want = append(want, moduleName(d))
			}
		}
		if !slices.Equal(deps, want) {
			t.Errorf("%s depends: read %v, modinfo says %v", m, deps, want)
		}
	}
}

func TestKernelPackageImages(t *testing.T) {
	k := testKernel(t)
	if hasPVHNote(k.bzImage) {
		t.Errorf("%s (a bzImage) reported as a PVH ELF", k.bzImage)
	}
	if k.vmlinux == "" {
		if _, err := exec.LookPath("xz"); err == nil {
			t.Errorf("xz is installed but no PVH vmlinux was extracted from %s", filepath.Base(k.bzImage))
		}
		return
	}
	if !hasPVHNote(k.vmlinux) {
		t.Errorf("%s has no PVH entry note", k.vmlinux)
	}
}
