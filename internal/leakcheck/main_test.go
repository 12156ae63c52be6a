package leakcheck_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// childEnv makes TestLeakyChild leak the named resource when this binary runs itself.
const childEnv = "LEAKCHECK_TEST_CHILD"

// keep holds what TestLeakyChild leaks, so nothing closes it before the check.
var keep []any

// TestLeakyChild leaks on purpose, only in the child run of TestMainFails.
func TestLeakyChild(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "":
		t.Skip("runs only as the child of TestMainFails")
	case "goroutine":
		go func() { select {} }()
	case "fd":
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, r, w)
	case "map":
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, b)
	case "none":
	}
}

// TestMainFails runs this test binary with a deliberate leak of each kind and checks that
// Main fails it and names the leak, and that a clean run passes.
func TestMainFails(t *testing.T) {
	for _, c := range []struct{ kind, want string }{
		{"goroutine", "1 goroutines"},
		{"fd", "2 file descriptors"},
		{"map", "1 shared mappings"},
		{"none", ""},
	} {
		t.Run(c.kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestLeakyChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+c.kind)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if c.want == "" {
				if err != nil {
					t.Fatalf("clean child failed: %v\n%s", err, out.String())
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("leaking child: err %v, want exit status 1\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "leak: ") || !strings.Contains(out.String(), c.want) {
				t.Errorf("report does not name the leak (%q):\n%s", c.want, out.String())
			}
		})
	}
}
