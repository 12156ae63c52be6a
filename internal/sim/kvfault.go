package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
)

// The KV store slow or down (issue 14). The failover layer reads and writes the store while it
// builds its shadows (its backup QPs' and control endpoints' entries, its MR entries), when a
// backup set is re-armed, and, for a peer's MR entry missing from its cache, in the shadow
// scans and, once per key, in a fallback round or a post on the backup (failover/rkcache.go).
// The model (faultKV, around the world's kv.Mem):
//
//   - down: every call fails with an error wrapping kv.ErrUnavailable, as an unreachable
//     store's client reports;
//   - slow: every call takes a drawn latency (0.2 to 5 ms) of virtual time, during which the
//     world goes on (the simulator's yield: NICs, fabric, clock, as while SHIFT waits for a
//     NIC), or, in a share of the windows, each call fails at once as one past the layer's
//     KVTimeout does (the simulation cannot block a call for seconds of virtual time: the
//     wait is not modelled, only its outcome).
//
// Drawn in a modest share of failover runs: a window during the set-up (the store down or
// slow from the start for up to 50 ms of virtual time: the shadows wait for it, errNotYet,
// and are built once it is back), or a window after it, at an instant in the first 10 ms,
// lasting up to 300 ms or for the rest of the run, with a default link down past the RC
// reach drawn at its start so that a fallback runs inside it. Invariant: no error completion, nothing
// lost, duplicated or reordered. Once the shadows are built the fallbacks, chains and
// recoveries must not need the store: the peers' MR entries are cached at shadow time, and a
// fallback must never wait for the store (issue 12 §5).

const (
	kvUp = iota
	kvDown
	kvSlow
	kvTimeout
)

// faultKV is the world's store with the faults of the run.
type faultKV struct {
	m       *kv.Mem
	mode    int
	latency time.Duration // kvSlow
	wait    func(time.Duration)
	refused *int // Result.Faults.KVRefused
}

var _ kv.Lister = (*faultKV)(nil)

func (f *faultKV) check(op, key string) error {
	switch f.mode {
	case kvDown:
		*f.refused++
		return fmt.Errorf("sim kv: %s %q: %w: store down", op, key, kv.ErrUnavailable)
	case kvTimeout:
		*f.refused++
		return fmt.Errorf("sim kv: %s %q: %w: %w", op, key, kv.ErrUnavailable, context.DeadlineExceeded)
	case kvSlow:
		f.wait(f.latency)
	}
	return nil
}

func (f *faultKV) Put(ctx context.Context, key string, value []byte) error {
	if err := f.check("put", key); err != nil {
		return err
	}
	return f.m.Put(ctx, key, value)
}

func (f *faultKV) Get(ctx context.Context, key string) ([]byte, error) {
	if err := f.check("get", key); err != nil {
		return nil, err
	}
	return f.m.Get(ctx, key)
}

func (f *faultKV) Delete(ctx context.Context, key string) error {
	if err := f.check("delete", key); err != nil {
		return err
	}
	return f.m.Delete(ctx, key)
}

func (f *faultKV) List(ctx context.Context, prefix string) ([]kv.Entry, error) {
	if err := f.check("list", prefix); err != nil {
		return nil, err
	}
	return f.m.List(ctx, prefix)
}

func (f *faultKV) Close() error { return f.m.Close() }

// kvWait lets the world run for d of virtual time while a KV call waits: the simulator's
// yield, as a wait for a NIC does. A call runs inside a context's step (a shadow scan, a
// round) or an application's verb, never inside yield.
func (s *runner) kvWait(d time.Duration) {
	until := s.w.clk.Now().Add(d)
	for s.w.clk.Now().Before(until) {
		s.yield()
	}
}

// setKV sets the store's mode and records it.
func (s *runner) setKV(mode int, lat time.Duration) {
	k := s.w.kv
	k.mode, k.latency = mode, lat
	switch mode {
	case kvDown:
		s.res.Faults.KVDowns++
		s.fault(fxKVDown, 0, 0, 0)
	case kvSlow, kvTimeout:
		s.res.Faults.KVSlows++
		s.fault(fxKVSlow, uint64(mode), uint64(lat), 0)
	default:
		s.fault(fxKVUp, 0, 0, 0)
	}
}

// drawKVMode draws a faulty mode: down, slow with a latency, or timing out.
func (s *runner) drawKVMode() (int, time.Duration) {
	switch s.fx.r.IntN(3) {
	case 0:
		return kvDown, 0
	case 1:
		return kvSlow, time.Duration(200+s.fx.r.IntN(4800)) * time.Microsecond
	}
	return kvTimeout, 0
}

// kvSetupFault: in a share of runs the store is faulty from the start, for up to 50 ms.
func (s *runner) kvSetupFault() {
	k := s.w.kv
	k.wait, k.refused = s.kvWait, &s.res.Faults.KVRefused
	if s.fx.r.IntN(100) >= 4 {
		return
	}
	mode, lat := s.drawKVMode()
	s.setKV(mode, lat)
	s.w.clk.AfterFunc(time.Duration(1+s.fx.r.IntN(50))*time.Millisecond, func() { s.setKV(kvUp, 0) })
}

// kvFault: in a share of runs the store is faulty from an instant in the first 10 ms after
// the set-up, for up to 300 ms or for the rest of the run, and a default link goes down past
// the RC reach within 10 ms of the window's start, so that the fallback (134 ms later) runs
// while the store is faulty in most of these runs.
func (s *runner) kvFault() {
	if s.fx.r.IntN(100) >= s.faultShare() {
		return
	}
	mode, lat := s.drawKVMode()
	at := s.faultAt()
	d := time.Duration(1+s.fx.r.IntN(300)) * time.Millisecond
	forever := s.fx.r.IntN(2) == 0
	s.fallbackAt(at + time.Duration(s.fx.r.IntN(10_000))*time.Microsecond)
	s.after(at, func() {
		s.setKV(mode, lat)
		if !forever {
			s.w.clk.AfterFunc(d, func() { s.setKV(kvUp, 0) })
		}
	})
}
