package main

import (
	"bytes"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// testRecvGate is an open receive gate with a receive log, owned by the test.
type testRecvGate struct {
	state     atomic.Uint32
	busy      uint32
	log       []failover.RecvLogRecord
	sge       []verbs.SGE
	stride    int
	maxRecvWR uint32
	posted    atomic.Uint64
}

// newTestRecvGate is a gate whose log holds n receives of stride scatter entries, for a
// queue of maxRecvWR.
func newTestRecvGate(n, stride int, maxRecvWR uint32) *testRecvGate {
	return &testRecvGate{log: make([]failover.RecvLogRecord, n), sge: make([]verbs.SGE, n*stride), stride: stride, maxRecvWR: maxRecvWR}
}

func (g *testRecvGate) share() failover.RecvGateShare {
	return failover.RecvGateShare{State: &g.state, Busy: &g.busy, MaxRecvWR: g.maxRecvWR,
		Log: g.log, SGE: g.sge, Stride: g.stride, Posted: &g.posted}
}

// TestSharedRecvMatchesGo is TestSharedPostMatchesGo for post_recv: the same random history
// of receive lists (some refused: too long, too many scatter entries), internal receives and
// retirements through the provider's PostRecv on one QP and through C on the other, then
// identical rings, tables, counters and doorbell records; and C's receive log holds exactly
// the receives it posted.
func TestSharedRecvMatchesGo(t *testing.T) {
	r := seeded(t)
	s := newSpostQPs(t, false)
	sh := s.shares(t)
	ra, rb := sh.ra, sh.rb
	stride := int(s.a.Cap().MaxRecvSGE)
	g := newTestRecvGate(64, stride, s.a.Cap().MaxRecvWR)
	c := newCheckSrecv(s.b, g.share())
	defer c.free()
	type logged struct {
		wrid uint64
		sgl  []verbs.SGE
	}
	var want []logged // every receive C posted, in order
	sge := func() verbs.SGE {
		n := uint32(r.IntN(3)) * uint32(1+r.IntN(100)) // some zero-length: skipped in the ring
		return verbs.SGE{Addr: s.base + uint64(r.IntN(2048)), Length: n, LKey: r.Uint32()}
	}
	posted, refused := 0, 0
	for round := range 6000 {
		switch op := r.IntN(20); {
		case op < 12:
			wrs := make([]verbs.RecvWR, 1+r.IntN(5))
			for i := range wrs {
				wrs[i].WRID = r.Uint64()
				for range r.IntN(stride + 1) {
					wrs[i].SGL = append(wrs[i].SGL, sge())
				}
				if r.IntN(40) == 0 {
					for len(wrs[i].SGL) <= rb.MaxGS {
						wrs[i].SGL = append(wrs[i].SGL, sge())
					}
				}
			}
			errA := s.a.PostRecv(wrs)
			okB := c.post(wrs)
			if (errA == nil) != okB {
				t.Fatalf("round %d: %+v: the provider's post_recv returned %v, C accepted: %v", round, wrs, errA, okB)
			}
			if okB {
				posted += len(wrs)
				for _, w := range wrs {
					want = append(want, logged{w.WRID, slices.Clone(w.SGL)})
				}
			} else {
				refused++
			}
		case op < 14:
			wr := []verbs.RecvWR{{WRID: r.Uint64(), SGL: []verbs.SGE{sge()}}}
			errA, errB := s.a.PostRecvInternal(wr), s.b.PostRecvInternal(wr)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("round %d: internal post_recv: %v vs %v", round, errA, errB)
			}
		default: // responder completions retire receives in order
			out := *ra.Head - ra.Tail.Load()
			if out == 0 {
				continue
			}
			k := 1 + uint32(r.IntN(int(out)))
			for _, sh := range []*provider.RecvShare{&ra, &rb} {
				last := (sh.Tail.Load() + k - 1) & (sh.WQECount - 1)
				sh.IntRetired.Store(sh.IntAt[last])
				sh.Tail.Store(sh.Tail.Load() + k)
			}
		}
		type counters struct {
			Head, RingHead, Internal, Tail, IntRetired uint32
			DB                                         []byte
		}
		of := func(sh *provider.RecvShare) counters {
			return counters{*sh.Head, *sh.RingHead, *sh.Internal, sh.Tail.Load(), sh.IntRetired.Load(), bytes.Clone(sh.DBRec[:4])}
		}
		if ca, cb := of(&ra), of(&rb); !cmp.Equal(ca, cb) {
			t.Fatalf("round %d: counters (-Go +C):\n%s", round, cmp.Diff(ca, cb))
		}
		if !slices.Equal(ra.WRID, rb.WRID) || !slices.Equal(ra.IntAt, rb.IntAt) {
			t.Fatalf("round %d: tables differ: wrid %v / %v, intAt %v / %v", round, ra.WRID, rb.WRID, ra.IntAt, rb.IntAt)
		}
		if !bytes.Equal(ra.Ring, rb.Ring) {
			t.Fatalf("round %d: the receive rings differ", round)
		}
		if g.busy != 0 {
			t.Fatalf("round %d: the C poster left the gate marked busy", round)
		}
		if p := g.posted.Load(); p != uint64(len(want)) {
			t.Fatalf("round %d: the log's head is %d, C posted %d receives", round, p, len(want))
		}
		for i := max(len(want)-len(g.log), 0); i < len(want); i++ {
			slot := i % len(g.log)
			rec := g.log[slot]
			got := g.sge[slot*stride : slot*stride+int(rec.NSGE)]
			if rec.WRID != want[i].wrid || !slices.Equal(got, want[i].sgl) {
				t.Fatalf("round %d: log position %d holds %#x %v, posted %#x %v", round, i, rec.WRID, got, want[i].wrid, want[i].sgl)
			}
		}
	}
	if posted == 0 || refused == 0 {
		t.Fatalf("the history did not exercise both outcomes: %d posted, %d lists refused", posted, refused)
	}
	t.Logf("%d receives posted, %d lists refused", posted, refused)
	g.state.Store(2)
	if c.post([]verbs.RecvWR{{WRID: 1}}) {
		t.Error("posted with the gate closed")
	}

	// The failover layer's own limits, narrower here than the provider's: a list longer than
	// its MaxRecvWR, a scatter list longer than its log's stride.
	sgl := make([]verbs.SGE, stride)
	for i := range sgl {
		sgl[i] = verbs.SGE{Addr: s.base, Length: 1, LKey: 1}
	}
	g2 := newTestRecvGate(8, stride-1, 2)
	c2 := newCheckSrecv(s.b, g2.share())
	defer c2.free()
	rb.Tail.Store(*rb.Head)
	rb.IntRetired.Store(*rb.Internal)
	head := *rb.Head
	if c2.post([]verbs.RecvWR{{WRID: 1}, {WRID: 2}, {WRID: 3}}) {
		t.Error("posted a list longer than the application's receive queue")
	}
	if c2.post([]verbs.RecvWR{{WRID: 4, SGL: sgl}}) {
		t.Errorf("posted %d scatter entries into a log of %d a receive", stride, stride-1)
	}
	if *rb.Head != head || g2.posted.Load() != 0 {
		t.Error("a refused receive list was written")
	}
	if !c2.post([]verbs.RecvWR{{WRID: 5, SGL: sgl[:stride-1]}}) || g2.posted.Load() != 1 {
		t.Error("a list within the limits was not posted")
	}
}
