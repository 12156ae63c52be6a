package failover

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider/verbs"
)

// TestOpenKVFromEnvironment opens both hosts with no Options.KV: the store comes from
// SHIFT_KV, or without it from the embedded default under XDG_RUNTIME_DIR, and the hosts
// find each other's shadows through it.
func TestOpenKVFromEnvironment(t *testing.T) {
	noKV := func(h int, o *Options) { o.KV = nil }
	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	t.Run("SHIFT_KV", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("SHIFT_KV", "dir:"+dir)
		e := newEnvWith(t, 64, noKV)
		e.pairs(t, 1, cp)
		for h, th := range e.hosts {
			if _, ok := th.ctx.opts.KV.(*kv.Dir); !ok || th.ctx.ownKV == nil {
				t.Errorf("host %d: store %T (own %v), want the dir store SHIFT_KV names", h, th.ctx.opts.KV, th.ctx.ownKV != nil)
			}
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
			t.Errorf("SHIFT_KV directory holds %d entries (%v), want the job's", len(ents), err)
		}
	})
	t.Run("embedded default", func(t *testing.T) {
		run := t.TempDir()
		t.Setenv("SHIFT_KV", "")
		t.Setenv("XDG_RUNTIME_DIR", run)
		e := newEnvWith(t, 64, noKV)
		e.pairs(t, 1, cp)
		fi, err := os.Stat(filepath.Join(run, "shift", "kv"))
		if err != nil {
			t.Fatalf("embedded store directory: %v", err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("embedded store directory mode %v, want a 0700 directory", fi.Mode())
		}
	})
}
