package vmtest

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// isStatic reports whether the ELF file at path needs no dynamic loader (no PT_INTERP).
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("vmtest: %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// sharedLibs lists the absolute paths of the libraries (and the dynamic loader) that the
// host's dynamic loader resolves for the dynamically linked ELF file at path, as ldd prints
// them. The guest gets them at the same paths, so the same resolution works there.
func sharedLibs(path string) ([]string, error) {
	static, err := isStatic(path)
	if err != nil || static {
		return nil, err
	}
	out, err := exec.Command("ldd", path).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("vmtest: ldd %s: %v: %s", path, err, bytes.TrimSpace(out))
	}
	return parseLdd(string(out))
}

// parseLdd extracts library paths from ldd output lines of the forms
// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)"
// and "linux-vdso.so.1 (0x...)" (the vDSO has no file and is skipped). An unresolved library
// ("=> not found") is an error: the guest could not run the program either.
func parseLdd(out string) ([]string, error) {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.Contains(line, "=> not found") {
			return nil, fmt.Errorf("vmtest: unresolved shared library: %s", line)
		}
		if _, rhs, ok := strings.Cut(line, "=> "); ok {
			line = rhs
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}

// addProgram puts the host program at src into the archive at guest, with the libraries it
// needs at their host paths.
func addProgram(a *archive, guest, src string) error {
	libs, err := sharedLibs(src)
	if err != nil {
		return err
	}
	if err := a.file(guest, src); err != nil {
		return err
	}
	for _, l := range libs {
		if err := a.file(l, l); err != nil {
			return err
		}
	}
	return nil
}

// linksLibibverbs reports whether a dynamically linked program needs libibverbs, in which
// case the guest also needs a provider for rxe.
func linksLibibverbs(src string) bool {
	libs, err := sharedLibs(src)
	if err != nil {
		return false
	}
	for _, l := range libs {
		if strings.HasPrefix(filepath.Base(l), "libibverbs.so") {
			return true
		}
	}
	return false
}

// rxeProvider returns the host files libibverbs needs to drive rxe0 in the guest: the
// rxe provider library and its driver file in /etc/libibverbs.d (which names it).
func rxeProvider() (lib, driver string, err error) {
	driver = "/etc/libibverbs.d/rxe.driver"
	if _, err := os.Stat(driver); err != nil {
		return "", "", fmt.Errorf("ibverbs-providers is not installed (%s missing)", driver)
	}
	libs, _ := filepath.Glob("/usr/lib/*/libibverbs/librxe-rdmav*.so")
	if len(libs) == 0 {
		return "", "", fmt.Errorf("ibverbs-providers is not installed (no librxe-rdmav*.so)")
	}
	return libs[0], driver, nil
}
