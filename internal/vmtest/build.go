package vmtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// BuildTestBinary compiles the tests of pkg (an import path or a "./dir" path relative to
// the module root) into a static binary with CGO_ENABLED=0 go test -c, in a temporary
// directory of t, and returns its path, or "" when pkg has no test files (go test -c then
// writes nothing). Cgo-only test files are left out by the build, as
// the guest has no C library for them.
func BuildTestBinary(t testing.TB, pkg string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	gomod, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("vmtest: go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if strings.TrimSpace(string(gomod)) == "" || root == "." {
		t.Fatalf("vmtest: not inside a Go module; cannot build %s", pkg)
	}
	out := filepath.Join(t.TempDir(), strings.NewReplacer("/", "_", ".", "_").Replace(strings.Trim(pkg, "./"))+".test")
	cmd := exec.Command(goTool, "test", "-c", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vmtest: CGO_ENABLED=0 go test -c %s: %v\n%s", pkg, err, stderr.String())
	}
	if _, err := os.Stat(out); err != nil {
		if strings.Contains(stderr.String(), "[no test files]") {
			return ""
		}
		t.Fatalf("vmtest: go test -c %s produced no binary: %v\n%s", pkg, err, stderr.String())
	}
	static, err := isStatic(out)
	if err != nil {
		t.Fatal(err)
	}
	if !static {
		t.Fatalf("vmtest: %s is dynamically linked despite CGO_ENABLED=0", out)
	}
	return out
}
