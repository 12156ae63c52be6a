package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/internal/rundir/rundirtest"
)

// TestControlOfAnotherUser: shiftctl inject and switch started by another user (uid 65534)
// against this process (root) are refused with the reason, with or without -file, before any
// file is opened.
func TestControlOfAnotherUser(t *testing.T) {
	rundirtest.NeedRoot(t)
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(rundirtest.Shared(t), "shiftctl")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "ctl")
	if err := os.WriteFile(victim, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	for _, args := range [][]string{
		{"inject", "-pid", pid, "-n", "1"},
		{"inject", "-pid", pid, "-file", victim},
		{"switch", "-pid", pid, "-qpn", "0x100", "-to", "backup"},
		{"switch", "-pid", pid, "-qpn", "0x100", "-to", "backup", "-file", victim},
	} {
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), "SHIFTCTL_TEST_MAIN=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rundirtest.Nobody, Gid: rundirtest.Nobody}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err == nil || !strings.Contains(out.String(), "belongs to uid 0") {
			t.Errorf("shiftctl %v as uid %d: %v\n%s", args, rundirtest.Nobody, err, out.String())
		}
	}
	if got, _ := os.ReadFile(victim); !bytes.Equal(got, make([]byte, 64)) {
		t.Errorf("the victim's file changed: %v", got)
	}
}

// TestControlFileRefusals: for its own process, shiftctl refuses a -file that is a link or
// that other users may write, and says when the process has no control file.
func TestControlFileRefusals(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{link, loose} {
		if _, err := openControl(os.Getpid(), f); !errors.Is(err, rundir.ErrUnsafe) {
			t.Errorf("openControl(-file %s): %v", f, err)
		}
	}
	if _, err := openControl(os.Getpid(), ""); err == nil || !strings.Contains(err.Error(), "SHIFT_INJECT_SHM=1") {
		t.Errorf("no control file: %v", err)
	}
	if _, err := openControl(1<<22+4321, ""); err == nil || !strings.Contains(err.Error(), "process") {
		t.Errorf("no such process: %v", err)
	}
}
