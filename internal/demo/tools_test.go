package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
)

// TestToolsPart runs the demo's tools part on a short schedule: in plain mode ib_write_bw
// dies of the pulled rail, in SHIFT mode it finishes with its traffic moved to rail 1 and
// back; the outputs are written.
func TestToolsPart(t *testing.T) {
	tooltest.RequireRoot(t)
	tooltest.RequireTools(t, "ib_write_bw", "ip")
	b := tooltest.BuildPlugin(t)
	c := ToolsConfig{PluginDir: b.Dir, Duration: 5 * time.Second, FailAt: 1500 * time.Millisecond,
		RecoverAt: 3 * time.Second, Interval: 100 * time.Millisecond}
	if why := ToolsUnavailable(c); why != "" {
		t.Fatalf("tools part unavailable with the plugin built and the tools present: %s", why)
	}
	var out strings.Builder
	runs, err := RunTools(context.Background(), c, []Mode{ModeProvider, ModeShift}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	plain, shift := runs[0], runs[1]
	if plain.Err == nil || !strings.Contains(plain.Failure, "status 12") {
		t.Errorf("plain run: err %v, failure %q; want the transport error (status 12)", plain.Err, plain.Failure)
	}
	if shift.Err != nil || shift.AvgMBps <= 0 {
		t.Errorf("SHIFT run: err %v (%s), %.1f MB/s; want exit 0 and a bandwidth\nstandard error:\n%s", shift.Err, shift.Failure, shift.AvgMBps, shift.Log)
	}
	if notes := shift.Notes(c); len(notes) != 2 {
		t.Errorf("SHIFT run: notes %q; want traffic on rail 1 after the down and on rail 0 after the up\nsamples %+v", notes, shift.Samples)
	}
	// Once back on rail 0 the traffic stays there: the receive-only server's probes (perftest
	// leaves its QP in RTR) failed and took the client off rail 0 again about every second.
	if back := shift.onRail(0, c.RecoverAt); back >= 0 {
		for _, s := range shift.Samples {
			if s.At > back && s.Rails[1] > 0.1*(s.Rails[0]+s.Rails[1]) && s.Rails[1] > 0.05 {
				t.Errorf("SHIFT run: traffic on rail 1 again at %v, after it was back on rail 0 at %v\nsamples %+v", s.At, back, shift.Samples)
				break
			}
		}
	}
	files, err := WriteToolsOutputs(t.TempDir(), c, runs)
	if err != nil || len(files) != 3 {
		t.Fatalf("outputs %v: %v", files, err)
	}
}

func TestToolsUnavailableNamesThePlugin(t *testing.T) {
	c := DefaultToolsConfig(t.TempDir())
	if why := ToolsUnavailable(c); why == "" {
		t.Fatal("no reason with an empty plugin directory")
	}
}
