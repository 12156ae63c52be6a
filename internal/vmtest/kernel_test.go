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

// TestFetchKernelOffline checks the cache fallback: when the kernel apt names cannot be
// downloaded, the newest complete cache entry is used, unless SHIFT_VM_KERNEL_PKG pins one.
func TestFetchKernelOffline(t *testing.T) {
	cache := t.TempDir()
	for _, v := range []string{"0.0.1-test", "0.0.2-test"} {
		root := filepath.Join(cache, "linux-image-"+v)
		for _, d := range []string{filepath.Join("lib/modules", v, "kernel"), "boot"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"boot/vmlinuz-" + v, readyFile} {
			if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// An incomplete entry (no ready marker) must never be chosen.
	if err := os.MkdirAll(filepath.Join(cache, "linux-image-9.9.9-partial"), 0o755); err != nil {
		t.Fatal(err)
	}
	// apt-cache names a package that is not cached and apt-get cannot fetch it.
	bin := t.TempDir()
	for name, script := range map[string]string{
		"apt-cache": "#!/bin/sh\necho '  Depends: linux-image-7.7.7-new'\n",
		"apt-get":   "#!/bin/sh\necho 'E: offline' >&2; exit 100\n",
		"dpkg-deb":  "#!/bin/sh\nexit 2\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(EnvKernelPkg, "")
	k, err := fetchKernel(cache)
	if err != nil || k.pkg != "linux-image-0.0.2-test" || k.version != "0.0.2-test" {
		t.Fatalf("offline fallback: %+v, %v; want the newest complete entry", k, err)
	}
	t.Setenv(EnvKernelPkg, "linux-image-7.7.7-new")
	if _, err := fetchKernel(cache); !errors.Is(err, errNoKernel) || !strings.Contains(err.Error(), "E: offline") {
		t.Errorf("pinned package offline: %v, want errNoKernel with apt's message", err)
	}
}
