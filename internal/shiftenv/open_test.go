package shiftenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

var clusterSeq atomic.Uint64

// openWith opens a failover context on an emulated host's NIC 0 with the Options the
// environment env asks for (SHIFT_BACKUP names NIC 1), registers one MR (a KV entry) and
// waits until the backup replayed it.
func openWith(t *testing.T, env map[string]string) *failover.Context {
	t.Helper()
	prefix := fmt.Sprintf("senv%d_%d_", os.Getpid(), clusterSeq.Add(1))
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 1, NICs: 2, Register: true, Prefix: prefix, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	env["SHIFT_BACKUP"] = prefix + "0:" + prefix + "1"
	o, err := Options(mapEnv(env), prefix+"0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := failover.Open(prefix+"0", o)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := provider.NewBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitShadow(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		errs := []error{mr.Dereg(), pd.Dealloc()}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, c.WaitShadow(ctx), c.Close(), buf.Free())
		if err := errors.Join(errs...); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return c
}

// The variables reach the library through the edge (moved from failover's environment test,
// now that failover reads none): SHIFT_KV names the store, or without it the embedded default
// lives under XDG_RUNTIME_DIR; SHIFT_INJECT_SHM=1 maps the control file, and the status file
// is written, in the runtime directory.
func TestOpenFromEnvironment(t *testing.T) {
	t.Run("SHIFT_KV", func(t *testing.T) {
		dir, xdg := t.TempDir(), t.TempDir()
		c := openWith(t, map[string]string{"SHIFT_KV": "dir:" + dir, "SHIFT_JOB": "envjob", "XDG_RUNTIME_DIR": xdg})
		if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
			t.Errorf("SHIFT_KV directory holds %d entries (%v), want the job's", len(ents), err)
		}
		if _, err := os.Stat(filepath.Join(xdg, "shift", "kv")); !os.IsNotExist(err) {
			t.Errorf("embedded store created though SHIFT_KV is set: %v", err)
		}
		if c.ControlFile() != "" || c.ControlErr() != nil {
			t.Errorf("control file %q (%v) without SHIFT_INJECT_SHM", c.ControlFile(), c.ControlErr())
		}
	})
	t.Run("embedded default", func(t *testing.T) {
		xdg := t.TempDir()
		c := openWith(t, map[string]string{"XDG_RUNTIME_DIR": xdg, "SHIFT_INJECT_SHM": "1"})
		run := filepath.Join(xdg, "shift")
		fi, err := os.Stat(filepath.Join(run, "kv"))
		if err != nil {
			t.Fatalf("embedded store directory: %v", err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("embedded store directory mode %v, want a 0700 directory", fi.Mode())
		}
		if err := c.ControlErr(); err != nil || filepath.Dir(c.ControlFile()) != run {
			t.Errorf("control file %q (%v), want one in %s", c.ControlFile(), err, run)
		}
		if err := c.StatusErr(); err != nil || filepath.Dir(c.StatusFile()) != run {
			t.Errorf("status file %q (%v), want one in %s", c.StatusFile(), err, run)
		}
	})
}
