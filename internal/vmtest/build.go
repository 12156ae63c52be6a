package vmtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildTestBinary compiles the tests of pkg (an import path or a "./dir" path relative to
// the module root) into a static binary with CGO_ENABLED=0 go test -c, in a temporary
// directory of t, and returns its path, or "" when pkg has no test files (go test -c then
// writes nothing). Cgo-only test files are left out by the build, as the guest has no C
// library for them.
func BuildTestBinary(t testing.TB, pkg string) string {
	t.Helper()
	return goBuild(t, pkg, ".test", "test", "-c")
}

// BuildBinary compiles the main package pkg into a static binary with CGO_ENABLED=0
// go build, in a temporary directory of t, and returns its path.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	out := goBuild(t, pkg, "", "build")
	if out == "" {
		t.Fatalf("vmtest: go build %s produced no binary", pkg)
	}
	return out
}

func goBuild(t testing.TB, pkg, suffix string, verb ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		} else {
			t.Fatalf("vmtest: no go command in PATH to build %s", pkg)
		}
	}
	gomod, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("vmtest: go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(gomod))
	if mod == "" || mod == os.DevNull {
		t.Fatalf("vmtest: not inside a Go module; cannot build %s", pkg)
	}
	root := filepath.Dir(mod)
	out := filepath.Join(t.TempDir(), filepath.Base(pkg)+suffix)
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd := exec.Command(goTool, append(verb, "-o", out, pkg)...)
	cmd.Dir, cmd.Env = root, env
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vmtest: CGO_ENABLED=0 go %s %s: %v\n%s", strings.Join(verb, " "), pkg, err, stderr.String())
	}
	if _, err := os.Stat(out); err != nil {
		if strings.Contains(stderr.String(), "[no test files]") {
			return ""
		}
		t.Fatalf("vmtest: go %s %s produced no binary: %v\n%s", strings.Join(verb, " "), pkg, err, stderr.String())
	}
	static, err := isStatic(out)
	if err != nil {
		t.Fatal(err)
	}
	if !static {
		t.Fatalf("vmtest: %s is dynamically linked despite CGO_ENABLED=0", out)
	}
	trackSources(t, goTool, root, pkg, env)
	return out
}

// trackSources stats every non-standard source file the binary of pkg is built from. go
// test caches a passing result keyed on the files the test process itself opened or
// stat'ed; the build above happens in a child go process, so without this a changed
// package under test could be answered with a stale cached PASS.
func trackSources(t testing.TB, goTool, root, pkg string, env []string) {
	t.Helper()
	const format = `{{if not .Standard}}{{$d := .Dir}}` +
		`{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .TestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
		`{{range .XTestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
		`{{range .SFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`
	cmd := exec.Command(goTool, "list", "-deps", "-test", "-f", format, pkg)
	cmd.Dir, cmd.Env = root, env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vmtest: go list -deps -test %s: %v", pkg, err)
	}
	files := append(strings.Fields(string(out)), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	for _, f := range files {
		os.Stat(f) // recorded by the testing package's file log; a missing file is fine
	}
}
