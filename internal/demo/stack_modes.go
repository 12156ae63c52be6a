package demo

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/shiftenv"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// NewProviderStack is the baseline: the plain provider on each host's default NIC
// (devs[host][0]), sized by libmlx5's variables as the plugin's are (the demo is an edge
// that reads the environment: internal/shiftenv).
func NewProviderStack(devs [][]string, cfg SideConfig) (Stack, error) {
	if len(devs) < 2 {
		return nil, fmt.Errorf("demo: provider stack: %d hosts, want 2", len(devs))
	}
	po, err := shiftenv.ProviderOptions(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("demo: provider stack: %w", err)
	}
	return &verbsStack{name: string(ModeProvider), cfg: cfg, hosts: make([]*stackHost, len(devs)),
		openHost: func(h int) (verbs.Context, error) { return provider.OpenWith(devs[h][0], po) }}, nil
}

var jobSeq atomic.Uint64

// NewShiftStack runs the workload through package failover: one failover Context per host
// with NIC 0 as the default device and NIC 1 as its backup, one in-process KV store shared by
// both hosts (they live in one process), and a job name of its own. The rest of the Options
// come from the environment as the plugin reads it (internal/shiftenv: SHIFT_INJECT,
// SHIFT_INJECT_SHM, XDG_RUNTIME_DIR, MLX5_*).
func NewShiftStack(devs [][]string, cfg SideConfig) (Stack, error) {
	if len(devs) < 2 {
		return nil, fmt.Errorf("demo: shift stack: %d hosts, want 2", len(devs))
	}
	env, err := shiftenv.Read(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("demo: shift stack: %w", err)
	}
	for h, d := range devs {
		if len(d) < 2 {
			return nil, fmt.Errorf("demo: shift stack: host %d has %d NICs, the failover needs a backup", h, len(d))
		}
	}
	store, job := kv.NewMem(), fmt.Sprintf("demo-%d", jobSeq.Add(1))
	a := cfg.Attr.Defaults()
	return &verbsStack{name: string(ModeShift), cfg: cfg, hosts: make([]*stackHost, len(devs)),
		openHost: func(h int) (verbs.Context, error) {
			o := failover.Options{Backups: devs[h][1:2], KV: store, Job: job, Port: a.Port, GIDIndex: int(a.GIDIndex)}
			if cfg.LinkEvents != nil {
				o.LinkEvents = cfg.LinkEvents(h)
			}
			if err := env.Fill(&o, devs[h][0]); err != nil {
				return nil, fmt.Errorf("demo: host %d: %w", h, err)
			}
			return failover.Open(devs[h][0], o)
		},
		ready:   waitShadow,
		summary: shiftSummary,
		// Let each backup device's goroutine replay the recorded destroys before the next
		// phase, so the backup objects go in order rather than all at once.
		settle: func(cs []verbs.Context) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return waitShadow(ctx, cs)
		},
	}, nil
}

// waitShadow waits until every host's backup device has replayed every control verb
// (backup QPs connected), so the failure can come at any time.
func waitShadow(ctx context.Context, cs []verbs.Context) error {
	for i, c := range cs {
		if err := c.(*failover.Context).WaitShadow(ctx); err != nil {
			return fmt.Errorf("demo: host %d: shadow verbs: %w", i, err)
		}
	}
	return nil
}

// shiftSummary adds up both hosts' failover counters.
func shiftSummary(cs []verbs.Context) string {
	var t failover.Stats
	for _, c := range cs {
		st := c.(*failover.Context).Stats()
		t.Fallbacks += st.Fallbacks
		t.Refused += st.Refused
		t.Reposted += st.Reposted
		t.Skipped += st.Skipped
		t.Recoveries += st.Recoveries
		t.RecvRecoveries += st.RecvRecoveries
		t.Probes += st.Probes
		t.SwitchBack += st.SwitchBack
		t.Stall += st.Stall
	}
	out := fmt.Sprintf("failover: %d QP fallbacks, %d refused, %d send WRs reposted on the backup, %d treated as already received",
		t.Fallbacks, t.Refused, t.Reposted, t.Skipped)
	if t.Recoveries > 0 {
		n := time.Duration(t.Recoveries)
		out += fmt.Sprintf("; %d send and %d receive sides back on the default NIC after %d probes (mean switch-back %v, mean stall %v)",
			t.Recoveries, t.RecvRecoveries, t.Probes, (t.SwitchBack / n).Round(time.Microsecond), (t.Stall / n).Round(time.Microsecond))
	}
	return out
}
