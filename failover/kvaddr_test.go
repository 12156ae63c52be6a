package failover

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider/verbs"
)

// TestOpenKVFromOptions opens both hosts with no Options.KV: the store comes from
// Options.KVAddr, or without it from the embedded default under Options.RunDir, and the
// hosts find each other's shadows through it. The environment plays no part (the edges turn
// SHIFT_KV and XDG_RUNTIME_DIR into those fields: internal/shiftenv).
func TestOpenKVFromOptions(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	t.Run("KVAddr", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("SHIFT_KV", "dir:"+t.TempDir()) // ignored by the library
		e := newEnvWith(t, 64, func(h int, o *Options) { o.KV, o.KVAddr = nil, "dir:"+dir })
		e.pairs(t, 1, cp)
		for h, th := range e.hosts {
			if _, ok := th.ctx.opts.KV.(*kv.Dir); !ok || th.ctx.ownKV == nil {
				t.Errorf("host %d: store %T (own %v), want the dir store KVAddr names", h, th.ctx.opts.KV, th.ctx.ownKV != nil)
			}
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
			t.Errorf("KVAddr directory holds %d entries (%v), want the job's", len(ents), err)
		}
	})
	t.Run("embedded default", func(t *testing.T) {
		run := filepath.Join(t.TempDir(), "shift")
		xdg := t.TempDir()
		t.Setenv("XDG_RUNTIME_DIR", xdg) // ignored by the library
		e := newEnvWith(t, 64, func(h int, o *Options) { o.KV, o.RunDir = nil, run })
		e.pairs(t, 1, cp)
		fi, err := os.Stat(filepath.Join(run, "kv"))
		if err != nil {
			t.Fatalf("embedded store directory: %v", err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("embedded store directory mode %v, want a 0700 directory", fi.Mode())
		}
		if _, err := os.Stat(filepath.Join(xdg, "shift")); !os.IsNotExist(err) {
			t.Errorf("XDG_RUNTIME_DIR/shift: %v, want nothing written there", err)
		}
	})
}
