package failover

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Two hosts that create and connect their QPs in opposite orders, the second one only after
// the first has recorded every connect, still get every backup QP connected: a shadow verb
// whose peer entry is missing is skipped and retried, never waited on in line. (Before the
// control QP pair was shared per context, host 1's sets connected while its own entries
// were refused; now a set needs the pair, which needs both contexts' entries.)
func TestShadowOppositeOrders(t *testing.T) {
	gate := &gatedKV{}
	e := newEnvWith(t, 64, func(h int, o *Options) {
		if h == 1 {
			gate.Store = o.KV
			o.KV = gate
		}
	})
	ha, hb := e.hosts[0], e.hosts[1]
	const n = 6
	var qa, qb [n]*QP
	var err error
	for i := range n {
		if qa[i], err = as[*QP](ha.pd.CreateQP(verbs.QPInitAttr{SendCQ: ha.cq, RecvCQ: ha.cq, Cap: smallCap})); err != nil {
			t.Fatal(err)
		}
	}
	// Host 1's store refuses its publications for now: its QPs exist (their numbers go out of
	// band) but their backup entries are missing while host 0 connects in order and host 1 in
	// reverse order.
	gate.closed.Store(true)
	for i := n - 1; i >= 0; i-- {
		if qb[i], err = as[*QP](hb.pd.CreateQP(verbs.QPInitAttr{SendCQ: hb.cq, RecvCQ: hb.cq, Cap: smallCap})); err != nil {
			t.Fatal(err)
		}
	}
	ep := func(q *QP, h *testHost, psn uint32) verbs.Endpoint {
		return verbs.Endpoint{QPN: q.QPN(), PSN: psn, GID: h.gid}
	}
	for i := range n {
		if err := verbs.Connect(qa[i], e.attr, ep(qa[i], ha, 1), ep(qb[i], hb, 2)); err != nil {
			t.Fatal(err)
		}
	}
	for i := n - 1; i >= 0; i-- {
		if err := verbs.Connect(qb[i], e.attr, ep(qb[i], hb, 2), ep(qa[i], ha, 1)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Host 1's goroutine gets past its blocked publications: every backup QP is created, and
	// its connects run behind them, reading host 0's entries far enough to create the
	// control QP towards host 0's context (whose publication is refused too). No backup set
	// connects yet: the control QP pair is per peer context, and host 0 learns host 1's
	// context from host 1's QP entries. Host 0's connects keep being skipped and retried.
	deadline := time.Now().Add(30 * time.Second)
	for {
		created := 0
		for _, q := range qb {
			if q.sets[0].qp.Load() != nil {
				created++
			}
		}
		if created == n && len(endpoints(hb, 0)) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host 1's verbs did not run while its publications were refused: %d backup QPs, %d control endpoints",
				created, len(endpoints(hb, 0)))
		}
		time.Sleep(time.Millisecond)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := ha.ctx.WaitShadow(short); err == nil || qa[0].BackupReady() || qb[0].BackupReady() {
		t.Fatalf("shadow verbs done without the peer's entries: %v", err)
	}
	cancelShort()
	gate.closed.Store(false)
	for _, h := range e.hosts {
		if err := h.ctx.WaitShadow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if !qa[i].BackupReady() || !qb[i].BackupReady() {
			t.Fatalf("pair %d: backup not connected", i)
		}
	}
	// The backup paths work: fail the default NIC and run one stream per pair.
	e.linkDown(0)
	for i := range n {
		runStream(t, e, qa[i], qb[i], stream{mode: modeSend, msgs: 8, size: 256, failAt: -1, seed: uint64(i)})
	}
	if gets := e.kv.Gets(); gets == 0 {
		t.Fatal("no KV lookups")
	} else {
		// Cached: more traffic does not ask the store again.
		runStream(t, e, qa[0], qb[0], stream{mode: modeWrite, msgs: 8, size: 256, failAt: -1, seed: 9})
		g1 := e.kv.Gets()
		runStream(t, e, qa[0], qb[0], stream{mode: modeWrite, msgs: 8, size: 256, failAt: -1, seed: 10})
		if e.kv.Gets() != g1 {
			t.Fatalf("rkey lookups not cached: %d then %d gets", g1, e.kv.Gets())
		}
	}
}

// gatedKV refuses Puts while closed (a host whose publications are late).
type gatedKV struct {
	kv.Store
	closed atomic.Bool
}

func (g *gatedKV) Put(ctx context.Context, key string, value []byte) error {
	if g.closed.Load() {
		return fmt.Errorf("gated: %w", kv.ErrUnavailable)
	}
	return g.Store.Put(ctx, key, value)
}
