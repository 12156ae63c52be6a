package kv_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/failover/kv/kvtest"
	"github.com/shift-rdma/shift/internal/rundir"
)

func TestDirConformance(t *testing.T) {
	root := t.TempDir()
	kvtest.Run(t, kvtest.Backend{
		Open: func(t testing.TB, job string) kv.Store {
			d, err := kv.NewDir(root, kv.DirOptions{Job: job})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			return d
		},
		Namespaced: true,
		Break: func(t testing.TB) {
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestDirOpenErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := kv.NewDir(filepath.Join(root, "absent"), kv.DirOptions{}); !errors.Is(err, kv.ErrUnavailable) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("open of a missing directory: %v", err)
	}
	f := filepath.Join(root, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.NewDir(f, kv.DirOptions{}); !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("open of a file: %v", err)
	}
	if _, err := kv.NewDir(root, kv.DirOptions{Job: "a/b"}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("job with a slash: %v", err)
	}
	d, err := kv.NewDir(root, kv.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Put(ctx, "", []byte{1}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("empty key: %v", err)
	}
	if err := d.Put(ctx, strings.Repeat("x", 300), []byte{1}); !errors.Is(err, unix.ENAMETOOLONG) {
		t.Fatalf("long key: %v", err)
	}
	if err := d.Purge(ctx); err == nil {
		t.Fatal("purge of a store without a job succeeded")
	}
}

// TestDirFiles checks the on-disk layout other processes rely on: one file per key, no
// temporary file left, nothing outside the directory, and Purge removing one job only.
func TestDirFiles(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	a, _ := kv.NewDir(root, kv.DirOptions{Job: "a"})
	b, _ := kv.NewDir(root, kv.DirOptions{Job: "b"})
	for _, k := range []string{"qp/1/2", "../escape", "..", "."} {
		if err := a.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Put(ctx, "qp/1/2", []byte("b")); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 5 {
		t.Fatalf("%d files for 5 keys", len(ents))
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("unexpected entry %q (%v)", e.Name(), e.Type())
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escape")); err == nil {
		t.Fatal("a key escaped the directory")
	}
	if err := a.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "qp/1/2"); err != nil || string(v) != "b" {
		t.Fatalf("job b after purging job a: %q %v", v, err)
	}
	if _, err := a.Get(ctx, "qp/1/2"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("job a after purge: %v", err)
	}
}

// TestDirUnreadable: a key file that cannot be read (here a directory in its place) is
// retried, then reported unavailable with the errno, never as missing.
func TestDirUnreadable(t *testing.T) {
	root := t.TempDir()
	d, _ := kv.NewDir(root, kv.DirOptions{})
	if err := os.Mkdir(filepath.Join(root, "k"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := d.Get(context.Background(), "k")
	if !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) || !errors.Is(err, unix.EISDIR) {
		t.Fatalf("unreadable key: %v", err)
	}
}

// TestDirTwoProcesses: a second process (this test binary re-executed) publishes entries
// that this one reads, and reads the ones this one published, through one directory.
func TestDirTwoProcesses(t *testing.T) {
	if os.Getenv("SHIFT_KV_DIR_CHILD") != "" {
		t.Skip("running as the helper process")
	}
	root := t.TempDir()
	d, err := kv.NewDir(root, kv.DirOptions{Job: "two"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Put(ctx, "from/parent", []byte("p")); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot re-execute the test binary: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^TestDirChildHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SHIFT_KV_DIR_CHILD="+root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	v, err := d.Get(ctx, "from/child")
	if err != nil || string(v) != "c:p" {
		t.Fatalf("entry of the child: %q %v", v, err)
	}
}

// TestDirChildHelper is the child of TestDirTwoProcesses; it does nothing on its own.
func TestDirChildHelper(t *testing.T) {
	root := os.Getenv("SHIFT_KV_DIR_CHILD")
	if root == "" {
		t.Skip("helper process of TestDirTwoProcesses")
	}
	d, err := kv.NewDir(root, kv.DirOptions{Job: "two"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := d.Get(ctx, "from/parent")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "from/child", append([]byte("c:"), v...)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDirGet: one Get of a 4-byte entry from a Dir store.
func BenchmarkDirGet(b *testing.B) {
	ctx := context.Background()
	d, err := kv.NewDir(b.TempDir(), kv.DirOptions{Job: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Put(ctx, "mr/fe80000000000000000000000000001/4660", []byte{0, 0, 0x12, 0x34}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.Get(ctx, "mr/fe80000000000000000000000000001/4660"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDirPut: one Put (temporary file, write, rename).
func BenchmarkDirPut(b *testing.B) {
	ctx := context.Background()
	d, err := kv.NewDir(b.TempDir(), kv.DirOptions{Job: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := d.Put(ctx, "qp/fe80000000000000000000000000001/291", []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDirRefusesUnsafeRoot: a root other users may write, or a link, is refused.
func TestDirRefusesUnsafeRoot(t *testing.T) {
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.NewDir(open, kv.DirOptions{}); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("world-writable root: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.NewDir(link, kv.DirOptions{}); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("root through a link: %v", err)
	}
}
