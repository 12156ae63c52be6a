package rundir_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/internal/rundir/rundirtest"
)

func TestEnsureAndCheck(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "shift")
	if err := rundir.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(dir); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("created %v, %v", st.Mode(), err)
	}
	if err := rundir.Ensure(dir); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := rundir.Ensure(open); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("world-writable directory: %v", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := rundir.Ensure(link); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("a link to a private directory: %v", err)
	}
	if err := rundir.Check(dir, os.Geteuid()+1); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("Check for another uid: %v", err)
	}
}

func TestCreateAndOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shift")
	if err := rundir.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	f, err := rundir.Create(dir, "ctl-1-2")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := rundir.Create(dir, "ctl-1-2"); !errors.Is(err, unix.EEXIST) {
		t.Errorf("second Create: %v", err)
	}
	precious := filepath.Join(t.TempDir(), "checkpoint")
	if err := os.WriteFile(precious, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(precious, filepath.Join(dir, "ctl-3-4")); err != nil {
		t.Fatal(err)
	}
	if _, err := rundir.Create(dir, "ctl-3-4"); !errors.Is(err, unix.EEXIST) {
		t.Errorf("Create over a link: %v", err)
	}
	if _, err := rundir.Open(filepath.Join(dir, "ctl-3-4"), os.O_RDWR, os.Geteuid()); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("Open of a link: %v", err)
	}
	if b, _ := os.ReadFile(precious); string(b) != "weights" {
		t.Errorf("the link's target changed: %q", b)
	}
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := rundir.Open(loose, os.O_RDWR, os.Geteuid()); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("Open of a world-writable file: %v", err)
	}
	if _, err := rundir.Open(filepath.Join(dir, "ctl-1-2"), os.O_RDONLY, os.Geteuid()+1); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("Open expecting another owner: %v", err)
	}
	if f, err := rundir.Open(filepath.Join(dir, "ctl-1-2"), os.O_RDWR, os.Geteuid()); err != nil {
		t.Errorf("Open of the own file: %v", err)
	} else {
		f.Close()
	}
}

// TestRemoveStale: the files of a gone process and of a reused pid go, the live one stays.
func TestRemoveStale(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shift")
	if err := rundir.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	start, err := rundir.ProcStart(os.Getpid())
	if err != nil || start == 0 {
		t.Fatalf("ProcStart: %d, %v", start, err)
	}
	live := rundir.ControlName(os.Getpid(), start)
	liveStatus := rundir.StatusName(os.Getpid(), start, 3)
	gone := 1<<22 + 12345
	for _, n := range []string{live, liveStatus, liveStatus + rundir.TempSuffix, "kv", "status-x-1-2",
		rundir.ControlName(os.Getpid(), start+1), rundir.ControlName(gone, 7),
		rundir.StatusName(gone, 7, 1), rundir.StatusName(os.Getpid(), start+1, 1) + rundir.TempSuffix} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n, err := rundir.RemoveStale(dir)
	if err != nil || n != 4 {
		t.Fatalf("removed %d (%v), want 4", n, err)
	}
	for _, keep := range []string{live, liveStatus, liveStatus + rundir.TempSuffix, "kv", "status-x-1-2"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s removed: %v", keep, err)
		}
	}
}

func TestParseName(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		pid        int
		start      uint64
		tmp, ok    bool
	}{
		{"ctl-12-34", "ctl", 12, 34, false, true},
		{"status-12-34-5", "status", 12, 34, false, true},
		{"status-12-34-5.tmp", "status", 12, 34, true, true},
		{"ctl-12-34-5", "", 0, 0, false, false},
		{"status-12-34", "", 0, 0, false, false},
		{"status-12-34-x", "", 0, 0, false, false},
		{"status-0-34-1", "", 0, 0, false, false},
		{"status--1-34-1", "", 0, 0, false, false},
		{"kv", "", 0, 0, false, false},
	} {
		kind, pid, start, tmp, ok := rundir.ParseName(c.name)
		if kind != c.kind || pid != c.pid || start != c.start || tmp != c.tmp || ok != c.ok {
			t.Errorf("%s: %q %d %d %v %v", c.name, kind, pid, start, tmp, ok)
		}
	}
}

// TestAttacks: another local user (uid 65534) prepares the victim's runtime directory in a
// shared place, as a link to the victim's checkpoint, as its own open directory, or fills it
// with its own file: each is refused, and nothing outside is written.
func TestAttacks(t *testing.T) {
	rundirtest.NeedRoot(t)
	base := rundirtest.Shared(t)
	precious := filepath.Join(t.TempDir(), "checkpoint")
	if err := os.WriteFile(precious, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}

	link := filepath.Join(base, "shift-link")
	rundirtest.Symlink(t, precious, link)
	if err := rundir.Ensure(link); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("runtime directory planted as a link: %v", err)
	}

	theirs := filepath.Join(base, "shift-theirs")
	rundirtest.Mkdir(t, theirs)
	if err := rundir.Ensure(theirs); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("runtime directory planted by another user: %v", err)
	}
	planted := filepath.Join(theirs, "ctl-1-1")
	rundirtest.File(t, planted)
	if _, err := rundir.Open(planted, os.O_RDWR, os.Geteuid()); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("control file planted by another user: %v", err)
	}
	if b, _ := os.ReadFile(precious); string(b) != "weights" {
		t.Errorf("checkpoint changed: %q", b)
	}
}
