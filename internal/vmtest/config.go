package vmtest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Binary is a host executable copied into the guest (under /tests) and run there with Args.
// It must be statically linked, as BuildTestBinary produces; the guest has no Go toolchain and
// only the shared libraries of the tools the harness itself ships.
type Binary struct {
	// Name labels the binary in the Result; it defaults to the base name of Path.
	Name string
	// Path is the binary on the host.
	Path string
	// Args are passed to the binary in the guest.
	Args []string
	// Env holds extra KEY=VALUE environment entries for the binary, on top of the guest's
	// (see GuestEnv).
	Env []string
}

// Command is a command run inside the guest with the guest's own tools (busybox applets,
// rdma, and whatever Config.Tools added), for example a smoke check such as
// {"devinfo", []string{"ibv_devinfo", "-d", "rxe0"}}.
type Command struct {
	// Name labels the command in the Result.
	Name string
	// Argv is the command and its arguments; Argv[0] is looked up in the guest's PATH.
	Argv []string
}

// Config describes one guest run. The zero value boots the guest, creates rxe0 and runs
// nothing else, which is itself a check that the real RDMA stack comes up.
type Config struct {
	// Commands run in the guest, in order, before the binaries.
	Commands []Command
	// Binaries run in the guest, in order, after the commands. Each runs with cwd /tmp and
	// stdin from /dev/null; a failing one does not stop the others.
	Binaries []Binary
	// Modules are loaded in addition to the defaults (crc32_generic, rdma_rxe, ib_uverbs,
	// dummy), with their dependency closure.
	Modules []string
	// Tools are host programs (names looked up in PATH, or absolute paths) copied into the
	// guest with their shared libraries, e.g. "ibv_devinfo". When one of them links
	// libibverbs, the rxe provider and its driver file are added too. A missing tool skips.
	Tools []string
	// MemoryMB is the guest memory; default 512.
	MemoryMB int
	// CPUs is the number of guest CPUs; default 2 (rxe needs more than one to make progress
	// on loopback while the test thread spins).
	CPUs int
	// Timeout bounds the whole QEMU run; default 5 minutes. SHIFT_VM_TIMEOUT (a Go duration)
	// overrides it, for slow machines.
	Timeout time.Duration
}

const (
	defaultMemoryMB = 512
	defaultCPUs     = 2
	defaultTimeout  = 5 * time.Minute
)

// defaultModules is what rxe over a dummy netdev needs. crc32_generic comes first because
// rxe asks the crypto API for crc32 when the link is added, and the guest has no modprobe
// path for the kernel's request_module.
var defaultModules = []string{"crc32_generic", "rdma_rxe", "ib_uverbs", "dummy"}

// stepName is what a guest step may be called: it appears unquoted in the line protocol.
var stepName = regexp.MustCompile(`^[A-Za-z0-9_.:+-]{1,64}$`)

// setupPrefix marks the harness's own steps (module loading, link setup) in the protocol.
const setupPrefix = "setup:"

// normalize fills defaults and checks names. It returns a copy.
func (c Config) normalize() (Config, error) {
	if c.MemoryMB == 0 {
		c.MemoryMB = defaultMemoryMB
	}
	if c.CPUs == 0 {
		c.CPUs = defaultCPUs
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	seen := map[string]bool{}
	check := func(name string) error {
		if !stepName.MatchString(name) {
			return fmt.Errorf("vmtest: step name %q: want 1-64 of [A-Za-z0-9_.:+-]", name)
		}
		if len(name) >= len(setupPrefix) && name[:len(setupPrefix)] == setupPrefix {
			return fmt.Errorf("vmtest: step name %q: prefix %q is reserved for the harness", name, setupPrefix)
		}
		if seen[name] {
			return fmt.Errorf("vmtest: step name %q used twice", name)
		}
		seen[name] = true
		return nil
	}
	c.Commands = append([]Command(nil), c.Commands...)
	for _, cmd := range c.Commands {
		if len(cmd.Argv) == 0 {
			return c, fmt.Errorf("vmtest: command %q has no argv", cmd.Name)
		}
		if err := check(cmd.Name); err != nil {
			return c, err
		}
	}
	c.Binaries = append([]Binary(nil), c.Binaries...)
	for i := range c.Binaries {
		b := &c.Binaries[i]
		if b.Path == "" {
			return c, fmt.Errorf("vmtest: binary %d has no path", i)
		}
		for _, kv := range b.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(k, " \t\n") {
				return c, fmt.Errorf("vmtest: binary %s: environment entry %q is not KEY=VALUE", b.Path, kv)
			}
		}
		if b.Name == "" {
			b.Name = filepath.Base(b.Path)
		}
		if err := check(b.Name); err != nil {
			return c, err
		}
	}
	return c, nil
}
