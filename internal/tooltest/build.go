package tooltest

import (
	"fmt"
	gobuild "go/build"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Build is a built plugin: the directory holding libmlx5-shift-rdmav34.so,
// libmlx5-shift-preload.so and the emulated kernel library libmlx5-emu-kernel.so.
type Build struct {
	Dir       string
	Plugin    string // the plugin's path
	Preload   string // the preload object's path
	EmuKernel string // the emulated kernel library's path (package mlx5/emu/kernelso)
}

var built struct {
	once sync.Once
	b    *Build
	err  error
}

// moduleRoot is the directory of the go.mod this package is built from.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("tooltest: cannot find the module root")
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file))), nil
}

// BuildFlags are the go build flags of the plugin (the Makefile's, kept equal by
// TestMakefileBuildsAlike): c-shared, asynchronous preemption off by default, and the soname
// libibverbs-style lookups find.
var BuildFlags = []string{"-buildmode=c-shared",
	"-ldflags=-s -w -X runtime.godebugDefault=asyncpreemptoff=1 -extldflags -Wl,-soname,libmlx5-shift-rdmav34.so"}

// KernelFlags are the go build flags of the emulated kernel library.
var KernelFlags = []string{"-buildmode=c-shared",
	"-ldflags=-s -w -X runtime.godebugDefault=asyncpreemptoff=1 -extldflags -Wl,-soname,libmlx5-emu-kernel.so"}

// PreloadFlags are the C compiler flags of the preload object.
var PreloadFlags = []string{"-O2", "-Wall", "-fPIC", "-shared", "-fvisibility=hidden",
	"-Wl,--version-script=provider/plugin/preload/preload.map", "-Wl,-soname,libmlx5-shift-preload.so"}

// BuildPlugin builds the plugin and the preload object once per process (into a directory
// RemoveBuild deletes), or skips the test when the Go toolchain or a C compiler is missing.
func BuildPlugin(tb testing.TB) *Build {
	tb.Helper()
	built.once.Do(func() { built.b, built.err = build() })
	if built.err != nil {
		if _, err := exec.LookPath("gcc"); err != nil {
			tb.Skipf("tooltest: building the plugin needs a C compiler (gcc): %v", err)
		}
		tb.Fatalf("tooltest: %v", built.err)
	}
	return built.b
}

func build() (*Build, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shift-plugin-")
	if err != nil {
		return nil, err
	}
	b := &Build{Dir: dir, Plugin: filepath.Join(dir, "libmlx5-shift-rdmav34.so"),
		Preload: filepath.Join(dir, "libmlx5-shift-preload.so"), EmuKernel: filepath.Join(dir, "libmlx5-emu-kernel.so")}
	// The toolchain this test was built with (go test may run with another go first on PATH).
	goTool := filepath.Join(gobuild.Default.GOROOT, "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	cmd := exec.Command(goTool, append(append([]string{"build"}, BuildFlags...), "-o", b.Plugin, "./provider/plugin")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("go build the plugin: %v\n%s", err, out)
	}
	cmd = exec.Command(goTool, append(append([]string{"build"}, KernelFlags...), "-o", b.EmuKernel, "./mlx5/emu/kernelso")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("go build the emulated kernel library: %v\n%s", err, out)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	cmd = exec.Command(cc, append(append([]string{}, PreloadFlags...), "-o", b.Preload, "provider/plugin/preload/preload.c", "-ldl")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s the preload object: %v\n%s", cc, err, out)
	}
	return b, nil
}

// RemoveBuild deletes the built plugin (call it from TestMain after the tests).
func RemoveBuild() {
	if built.b != nil {
		os.RemoveAll(built.b.Dir)
	}
}

// RequireTools skips the test unless every program is on PATH.
func RequireTools(tb testing.TB, names ...string) {
	tb.Helper()
	var missing []string
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		tb.Skipf("tooltest: %s not installed (Debian packages ibverbs-utils and perftest; make deps installs them)",
			strings.Join(missing, ", "))
	}
}

// RequireRoot skips the test unless it runs as root: the command-device stand-ins live in
// /dev/infiniband, a path compiled into libibverbs.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("tooltest: emulated devices for unmodified programs need root (stand-ins in /dev/infiniband)")
	}
}

// Harness builds the C program provider/plugin/bench/NAME.c against libibverbs into the
// test's temporary directory, or skips the test when gcc or libibverbs-dev is missing.
func Harness(tb testing.TB, name string) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(tb.TempDir(), name)
	src := filepath.Join(root, "provider/plugin/bench", name+".c")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, src, "-libverbs").CombinedOutput(); err != nil {
		tb.Skipf("building %s.c needs gcc and libibverbs-dev: %v\n%s", name, err, out)
	}
	return bin
}
