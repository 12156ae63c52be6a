package vmtest

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// kernel is an unpacked Debian kernel package in the cache.
type kernel struct {
	pkg     string // Debian package name, e.g. linux-image-6.1.0-56-amd64
	version string // module directory name, e.g. 6.1.0-56-amd64
	bzImage string // boot/vmlinuz-<version>
	vmlinux string // uncompressed ELF with a PVH entry note, or "" when unavailable
	modDir  string // lib/modules/<version>
}

// errNoKernel marks a kernel package that cannot be had here (no apt, no network, no
// package); the tier skips on it.
var errNoKernel = errors.New("kernel package unavailable")

// metaPackage is the Debian meta package whose dependency names the current kernel.
const metaPackage = "linux-image-amd64"

// readyFile marks a fully unpacked cache entry; entries without it are incomplete.
const readyFile = ".ready"

// kernelPackage names the kernel package: SHIFT_VM_KERNEL_PKG, else what linux-image-amd64
// depends on. Without apt it falls back to the newest complete cache entry, so a cache
// filled once works offline.
func kernelPackage(cache string) (string, error) {
	if p := os.Getenv(EnvKernelPkg); p != "" {
		return p, nil
	}
	out, err := exec.Command("apt-cache", "depends", metaPackage).Output()
	if err == nil {
		m := regexp.MustCompile(`(?m)^\s*Depends:\s*(linux-image-[0-9][^\s]*)`).FindSubmatch(out)
		if m != nil {
			return string(m[1]), nil
		}
	}
	if old := newestCached(cache); old != "" {
		return old, nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: apt-cache depends %s: %v", errNoKernel, metaPackage, err)
	}
	return "", fmt.Errorf("%w: apt-cache depends %s names no linux-image-<version> package", errNoKernel, metaPackage)
}

// fetchKernel returns the cached kernel package, downloading and unpacking it on first use.
// An exclusive flock on the cache serialises concurrent test processes; the unpacked tree is
// renamed into place only when complete.
func fetchKernel(cache string) (*kernel, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("vmtest: cache %s: %w", cache, err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("vmtest: cache lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("vmtest: flock %s: %w", lock.Name(), err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)

	pkg, err := kernelPackage(cache)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, pkg)
	if _, err := os.Stat(filepath.Join(dir, readyFile)); err != nil {
		if err := downloadKernel(cache, pkg, dir); err != nil {
			// Offline with newer apt lists than the cache: an older cached kernel still
			// exercises the same ABI, unless a specific package was asked for.
			old := newestCached(cache)
			if !errors.Is(err, errNoKernel) || old == "" || os.Getenv(EnvKernelPkg) != "" {
				return nil, err
			}
			pkg, dir = old, filepath.Join(cache, old)
		}
	}
	return openKernel(pkg, dir)
}

// newestCached returns the last (by name) complete kernel entry in the cache, or "".
func newestCached(cache string) string {
	ents, _ := filepath.Glob(filepath.Join(cache, "linux-image-*", readyFile))
	if len(ents) == 0 {
		return ""
	}
	sort.Strings(ents)
	return filepath.Base(filepath.Dir(ents[len(ents)-1]))
}

// downloadKernel fetches pkg with apt-get download and unpacks it with dpkg-deb -x into
// dir. It never installs anything on the host.
func downloadKernel(cache, pkg, dir string) error {
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s not found (a Debian host is needed to fetch %s)", errNoKernel, tool, pkg)
		}
	}
	tmp, err := os.MkdirTemp(cache, ".fetch-")
	if err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	defer os.RemoveAll(tmp)
	dl := exec.Command("apt-get", "download", pkg)
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: apt-get download %s: %v: %s", errNoKernel, pkg, err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, pkg+"_*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("vmtest: apt-get download %s left %d .deb files", pkg, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], root).CombinedOutput(); err != nil {
		return fmt.Errorf("vmtest: dpkg-deb -x %s: %v: %s", filepath.Base(debs[0]), err, bytes.TrimSpace(out))
	}
	k, err := openKernel(pkg, root)
	if err != nil {
		return err
	}
	// An uncompressed vmlinux boots through its PVH entry and saves the in-guest xz
	// decompression, seconds under TCG. Without xz the bzImage still works.
	if err := extractVmlinux(k.bzImage, filepath.Join(root, "vmlinux")); err != nil && !errors.Is(err, errNoVmlinux) {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, readyFile), []byte(pkg+"\n"), 0o644); err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	os.RemoveAll(dir) // an incomplete entry from an interrupted run
	if err := os.Rename(root, dir); err != nil {
		return fmt.Errorf("vmtest: cache %s: %w", dir, err)
	}
	return nil
}

// openKernel describes an unpacked kernel package at dir.
func openKernel(pkg, dir string) (*kernel, error) {
	mods, _ := filepath.Glob(filepath.Join(dir, "lib", "modules", "*", "kernel"))
	if len(mods) != 1 {
		return nil, fmt.Errorf("vmtest: %s: want one lib/modules/<version>/kernel, found %d", pkg, len(mods))
	}
	k := &kernel{pkg: pkg, modDir: filepath.Dir(mods[0])}
	k.version = filepath.Base(k.modDir)
	k.bzImage = filepath.Join(dir, "boot", "vmlinuz-"+k.version)
	if _, err := os.Stat(k.bzImage); err != nil {
		return nil, fmt.Errorf("vmtest: %s: %w", pkg, err)
	}
	if v := filepath.Join(dir, "vmlinux"); hasPVHNote(v) {
		k.vmlinux = v
	}
	return k, nil
}

// errNoVmlinux means the bzImage could not be unpacked to an ELF vmlinux here.
var errNoVmlinux = errors.New("no uncompressed vmlinux")

// xzMagic starts an xz stream (the .xz file format specification, section 2.1.1.1).
var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}

// extractVmlinux finds the xz-compressed payload inside a bzImage and decompresses its first
// stream with the xz tool; what follows the stream in the bzImage is not xz and is ignored.
func extractVmlinux(bzImage, out string) error {
	img, err := os.ReadFile(bzImage)
	if err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	off := bytes.Index(img, xzMagic)
	if off < 0 {
		return fmt.Errorf("%w: %s has no xz payload", errNoVmlinux, filepath.Base(bzImage))
	}
	if _, err := exec.LookPath("xz"); err != nil {
		return fmt.Errorf("%w: xz not found", errNoVmlinux)
	}
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	defer os.Remove(out + ".tmp")
	xz := exec.Command("xz", "-dcq", "--single-stream")
	xz.Stdin = bytes.NewReader(img[off:])
	xz.Stdout = f
	var stderr bytes.Buffer
	xz.Stderr = &stderr
	runErr := xz.Run()
	if err := f.Close(); err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	if runErr != nil || !hasPVHNote(out+".tmp") {
		return fmt.Errorf("%w: xz: %v %s", errNoVmlinux, runErr, strings.TrimSpace(stderr.String()))
	}
	return os.Rename(out+".tmp", out)
}

// xenElfnotePhys32Entry is XEN_ELFNOTE_PHYS32_ENTRY from xen/interface/elfnote.h: the 32-bit
// PVH entry point QEMU's -kernel needs to boot an ELF vmlinux directly.
const xenElfnotePhys32Entry = 18

// hasPVHNote reports whether path is an ELF file carrying a Xen PVH entry note.
func hasPVHNote(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			return false
		}
		for len(data) >= 12 {
			namesz := f.ByteOrder.Uint32(data[0:])
			descsz := f.ByteOrder.Uint32(data[4:])
			typ := f.ByteOrder.Uint32(data[8:])
			n := 12 + align4(namesz) + align4(descsz)
			if uint64(n) > uint64(len(data)) {
				break
			}
			name := string(bytes.TrimRight(data[12:12+namesz], "\x00"))
			if name == "Xen" && typ == xenElfnotePhys32Entry {
				return true
			}
			data = data[n:]
		}
	}
	return false
}

func align4(n uint32) uint32 { return (n + 3) &^ 3 }
