package failover

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider/verbs"
)

// delayKV is the test's Mem with every Get and List taking delay (a remote store).
type delayKV struct {
	*kv.Mem
	delay time.Duration
	gets  atomic.Int64
}

func (s *delayKV) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	time.Sleep(s.delay)
	return s.Mem.Get(ctx, key)
}

func (s *delayKV) List(ctx context.Context, prefix string) ([]kv.Entry, error) {
	time.Sleep(s.delay)
	return s.Mem.List(ctx, prefix)
}

// TestMeasureFallbackKV (SHIFT_MEASURE_KV=1) logs what a fallback of 4 WRITEs to 4 peer MRs
// spends in the store, with the MRs registered before the QP connected (cached) and after
// (not listed yet), for a store answering at once and one answering in 5 ms: the time inside
// the fallback round (q.tBusy, q.mu held), the Gets made from the failure to the last
// completion, and that wall time.
func TestMeasureFallbackKV(t *testing.T) {
	if os.Getenv("SHIFT_MEASURE_KV") == "" {
		t.Skip("SHIFT_MEASURE_KV not set")
	}
	for _, delay := range []time.Duration{0, 5 * time.Millisecond} {
		for _, late := range []bool{false, true} {
			s := &delayKV{delay: delay}
			e := newEnvWith(t, 256, func(h int, o *Options) {
				if h == 0 {
					s.Mem = o.KV.(*kv.Mem)
				}
				o.KV = s
			})
			ha, hb := e.hosts[0], e.hosts[1]
			var mrs []*MR
			reg := func() {
				for i := range 4 {
					m, err := as[*MR](hb.pd.RegMR(hb.buf.Bytes()[(i+1)<<19:(i+2)<<19], verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
					if err != nil {
						t.Fatal(err)
					}
					mrs = append(mrs, m)
				}
			}
			if !late {
				reg()
			}
			a, _ := e.pairs(t, 1, smallCap)
			if late {
				reg()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := hb.ctx.WaitShadow(ctx); err != nil {
					t.Fatal(err)
				}
				cancel()
			}
			qa := a[0]
			gets := s.gets.Load()
			e.linkDown(0)
			start := time.Now()
			for i, m := range mrs {
				w := verbs.SendWR{WRID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{ha.mr.SGE(i*1024, 1024)}, RemoteAddr: m.Addr(), RKey: m.RKey()}
				if err := qa.PostSend([]verbs.SendWR{w}); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range waitN(t, ha.cq, len(mrs)) {
				if w.Status != verbs.WCSuccess {
					t.Fatalf("completion %+v (%v)", w, qa.Err())
				}
			}
			t.Logf("store delay %v, MRs registered %s: round (q.mu held) %v, %d Gets, failure→last completion %v; stats %+v",
				delay, map[bool]string{false: "before the connection", true: "after the connection"}[late],
				time.Duration(qa.tBusy.Load()).Round(time.Microsecond), s.gets.Load()-gets, time.Since(start).Round(time.Microsecond), ha.ctx.Stats())
		}
	}
}
