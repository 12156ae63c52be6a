package failover

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/internal/rundir/rundirtest"
)

// TestControlFileAttacks: another local user prepares the victim's runtime directory before
// the victim starts with a control file (Options.ControlFile, SHIFT_INJECT_SHM=1 at the
// edges), as a link to the victim's checkpoint or as its own open directory. The victim's
// contexts open without a control file, say why (ControlErr), carry their traffic, and
// nothing outside the runtime directory is written.
func TestControlFileAttacks(t *testing.T) {
	rundirtest.NeedRoot(t)
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, dir, precious string)
	}{
		{"link", func(t *testing.T, dir, precious string) { rundirtest.Symlink(t, precious, dir) }},
		{"their directory", func(t *testing.T, dir, _ string) { rundirtest.Mkdir(t, dir) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			xdg := rundirtest.Shared(t)
			precious := filepath.Join(t.TempDir(), "checkpoint")
			if err := os.WriteFile(precious, []byte("weights"), 0o600); err != nil {
				t.Fatal(err)
			}
			c.plant(t, filepath.Join(xdg, "shift"), precious)
			e := newEnvWith(t, 256, func(h int, o *Options) { o.RunDir, o.ControlFile = filepath.Join(xdg, "shift"), true })
			for h, host := range e.hosts {
				if err := host.ctx.ControlErr(); !errors.Is(err, rundir.ErrUnsafe) || host.ctx.ControlFile() != "" {
					t.Errorf("host %d: ControlErr %v, ControlFile %q; want the refusal and no file", h, err, host.ctx.ControlFile())
				}
			}
			a, b := e.pairs(t, 1, smallCap)
			runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 50, size: 1024, failAt: -1, seed: 5})
			if got, _ := os.ReadFile(precious); string(got) != "weights" {
				t.Errorf("checkpoint changed: %q", got)
			}
		})
	}
}
