package vmtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// errPrereq marks a missing host prerequisite: the tier skips (or fails under SHIFT_VM=1).
var errPrereq = errors.New("prerequisite missing")

// requiredTools are host programs every guest gets: the iproute2 rdma tool creates rxe0.
var requiredTools = []string{"rdma"}

// findBusybox returns a statically linked busybox; the guest has no libc of its own for it.
func findBusybox() (string, error) {
	p, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("%w: busybox not found (install busybox-static)", errPrereq)
	}
	static, err := isStatic(p)
	if err != nil {
		return "", err
	}
	if !static {
		return "", fmt.Errorf("%w: %s is dynamically linked (install busybox-static)", errPrereq, p)
	}
	return p, nil
}

// buildInitramfs writes the guest's root file system as an uncompressed newc archive to
// out (uncompressed because decompressing in the guest costs seconds under TCG) and returns
// its size.
func buildInitramfs(k *kernel, cfg Config, out string) (int64, error) {
	a := newArchive()
	for _, d := range []string{"proc", "sys", "dev", "tmp", "tests", "bin", "sbin", "usr/bin", "usr/sbin"} {
		if err := a.dir(d, 0o755); err != nil {
			return 0, err
		}
	}
	// The kernel opens /dev/console for init's stdio before devtmpfs is mounted.
	if err := a.chardev("dev/console", 0o600, 5, 1); err != nil {
		return 0, err
	}
	bb, err := findBusybox()
	if err != nil {
		return 0, err
	}
	if err := a.file("bin/busybox", bb); err != nil {
		return 0, err
	}

	mods := append(append([]string(nil), defaultModules...), cfg.Modules...)
	order, modPaths, err := moduleClosure(k.modDir, mods)
	if err != nil {
		return 0, err
	}
	for _, m := range order {
		if err := a.file(path.Join("lib/modules", k.version, modPaths[m]), filepath.Join(k.modDir, modPaths[m])); err != nil {
			return 0, err
		}
	}

	needVerbs := false
	for _, tool := range append(append([]string(nil), requiredTools...), cfg.Tools...) {
		src, err := exec.LookPath(tool)
		if err != nil {
			return 0, fmt.Errorf("%w: %s not found in PATH", errPrereq, tool)
		}
		if err := addProgram(a, path.Join("usr/bin", filepath.Base(src)), src); err != nil {
			return 0, err
		}
		needVerbs = needVerbs || linksLibibverbs(src)
	}
	if needVerbs {
		lib, driver, err := rxeProvider()
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errPrereq, err)
		}
		if err := addProgram(a, lib, lib); err != nil {
			return 0, err
		}
		if err := a.file(driver, driver); err != nil {
			return 0, err
		}
	}

	var steps []guestStep
	for _, c := range cfg.Commands {
		steps = append(steps, guestStep{c.Name, c.Argv})
	}
	for _, b := range cfg.Binaries {
		static, err := isStatic(b.Path)
		if err != nil {
			return 0, err
		}
		if !static {
			return 0, fmt.Errorf("vmtest: binary %s is dynamically linked; build it with CGO_ENABLED=0 (BuildTestBinary does)", b.Path)
		}
		guest := path.Join("tests", b.Name)
		if err := a.file(guest, b.Path); err != nil {
			return 0, err
		}
		argv := append([]string{"/" + guest}, b.Args...)
		if len(b.Env) > 0 {
			argv = append(append([]string{"env"}, b.Env...), argv...)
		}
		steps = append(steps, guestStep{b.Name, argv})
	}
	if err := a.bytes("init", 0o755, []byte(initScript(k.version, order, modPaths, steps))); err != nil {
		return 0, err
	}

	f, err := os.Create(out)
	if err != nil {
		return 0, fmt.Errorf("vmtest: %w", err)
	}
	n, err := a.writeTo(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("vmtest: write initramfs: %w", err)
	}
	return n, nil
}
