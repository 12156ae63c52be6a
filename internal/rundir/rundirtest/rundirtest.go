// Package rundirtest plays the other local user of the runtime-directory tests: it runs
// ordinary commands (ln, mkdir, sh) as uid and gid 65534 in a shared, world-writable sticky
// directory like /dev/shm.
package rundirtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Nobody is the uid and gid the attacker runs as.
const Nobody = 65534

// NeedRoot skips t unless it runs as root (which starting a process as another user needs).
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the attacker runs as another user: needs root to start it")
	}
}

// Shared is a fresh world-writable sticky directory, as /dev/shm is, that uid 65534 can
// reach; it goes with the test.
func Shared(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != filepath.Clean(os.TempDir()); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d, 0o1777); err != nil {
		t.Fatal(err)
	}
	return d
}

// As65534 runs the command name args as uid/gid 65534 and fails t if it fails.
func As65534(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid %d: %s %v: %v\n%s", Nobody, name, args, err, out)
	}
}

// Symlink makes path a link to target, as the other user.
func Symlink(t testing.TB, target, path string) { t.Helper(); As65534(t, "ln", "-s", target, path) }

// Mkdir makes path a directory of the other user that anyone may write.
func Mkdir(t testing.TB, path string) { t.Helper(); As65534(t, "mkdir", "-m", "0777", path) }

// File makes path a 64-byte file of the other user that anyone may write.
func File(t testing.TB, path string) {
	t.Helper()
	As65534(t, "sh", "-c", `umask 0; head -c 64 /dev/zero > "$1"`, "sh", path)
}
