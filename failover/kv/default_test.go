package kv_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/rundir/rundirtest"
)

func TestDefaultDirPath(t *testing.T) {
	if got := kv.DefaultDirPath("/run/user/7/shift"); got != "/run/user/7/shift/kv" {
		t.Errorf("with a runtime directory: %s", got)
	}
	if got := kv.DefaultDirPath(""); filepath.Dir(filepath.Dir(got)) != "/dev/shm" {
		t.Errorf("without: %s", got)
	}
}

func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	d, err := kv.PrivateDir(filepath.Join(base, "shift", "kv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d, filepath.Dir(d)} {
		st, err := os.Lstat(p)
		if err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
			t.Errorf("%s: %v %v, want a 0700 directory", p, st.Mode(), err)
		}
	}
	if _, err := kv.PrivateDir(d); err != nil {
		t.Errorf("second call: %v", err)
	}
	loose := filepath.Join(base, "loose")
	if err := os.Mkdir(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PrivateDir(filepath.Join(loose, "kv")); !errors.Is(err, syscall.EPERM) {
		t.Errorf("group/other-writable parent: %v, want EPERM", err)
	}
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "linked")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PrivateDir(filepath.Join(link, "kv")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("a symlinked parent: %v, want ENOTDIR", err)
	}
}

// TestDefaultStoreAttacks: another local user (uid 65534) plants the victim's runtime
// directory first, as its own open directory or as a link to a directory of the victim's:
// the embedded default store refuses to open there, and nothing is written into the target.
func TestDefaultStoreAttacks(t *testing.T) {
	rundirtest.NeedRoot(t)
	for name, plant := range map[string]func(t *testing.T, dir, target string){
		"their directory": func(t *testing.T, dir, _ string) { rundirtest.Mkdir(t, dir) },
		"link":            func(t *testing.T, dir, target string) { rundirtest.Symlink(t, target, dir) },
	} {
		t.Run(name, func(t *testing.T) {
			xdg := rundirtest.Shared(t)
			target := t.TempDir()
			plant(t, filepath.Join(xdg, "shift"), target)
			st, err := kv.OpenDefault(context.Background(), "", "job", filepath.Join(xdg, "shift"))
			if err == nil {
				st.Close()
				t.Fatal("the embedded store opened in a directory another user controls")
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("written into the link's target: %v", ents)
			}
		})
	}
}
