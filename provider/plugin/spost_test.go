package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The differential test of SHIFT mode's C poster (spost.c) against the provider's PostSend:
// two QPs of one emulated device (stepped, so nothing executes and the rings stay as posted)
// get the same random history, one through Go only, the other through C with some of its
// posts through Go as well (the two posters take turns on a SHIFT QP). After every step the
// rings (but for the QPN in each control segment), the per-WQE tables, the counters, the
// doorbell records and the BlueFlame registers must be the same, and C must refuse exactly
// what the provider refuses.

// spostQPs is a device with two RC QPs in RTS of one geometry, each with a CQ of its own.
type spostQPs struct {
	a, b     *provider.QP
	cqA, cqB *provider.CQ
	data     []byte
	base     uint64
}

var spostSeq atomic.Uint64

func newSpostQPs(t *testing.T, sigAll bool) *spostQPs { return newSpostQPsSig(t, sigAll) }

// newSpostQPsTB is newSpostQPs for benchmarks.
func newSpostQPsTB(b *testing.B) *spostQPs { return newSpostQPsSig(b, false) }

func newSpostQPsSig(t testing.TB, sigAll bool) *spostQPs {
	t.Helper()
	t.Helper()
	prefix := fmt.Sprintf("spost%d_%d_", os.Getpid(), spostSeq.Add(1))
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 1, Register: true, Prefix: prefix, Seed: 1,
		Clock: clock.NewManual(time.Unix(1e9, 0)), Stepped: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	ctx, err := provider.Open(prefix + "0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("close context: %v", err)
		}
	})
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	s := &spostQPs{data: mapped(t, 4096)}
	s.base = uint64(uintptr(unsafe.Pointer(&s.data[0])))
	var qps [2]*provider.QP
	var cqs [2]*provider.CQ
	for i := range qps {
		cq, err := ctx.CreateCQ(verbs.CQInitAttr{CQE: 256})
		if err != nil {
			t.Fatal(err)
		}
		cqs[i] = cq.(*provider.CQ)
		t.Cleanup(func() { cq.Destroy() })
		v, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, SigAll: sigAll,
			Cap: verbs.QPCap{MaxSendWR: 24, MaxRecvWR: 24, MaxSendSGE: 4, MaxRecvSGE: 3, MaxInlineData: 200}})
		if err != nil {
			t.Fatal(err)
		}
		q := v.(*provider.QP)
		q.ReserveSend(3) // as the failover layer does: slots for its own WRs
		q.ReserveRecv(2)
		if err := verbs.Connect(q, verbs.ConnectAttr{}, verbs.Endpoint{QPN: q.QPN(), PSN: 1}, verbs.Endpoint{QPN: 0x77 + uint32(i), PSN: 1}); err != nil {
			t.Fatalf("connect QP %d: %v", i, err)
		}
		qps[i] = q
		t.Cleanup(func() {
			if err := q.Destroy(); err != nil {
				t.Errorf("destroy QP: %v", err)
			}
		})
	}
	s.a, s.b = qps[0], qps[1]
	s.cqA, s.cqB = cqs[0], cqs[1]
	t.Cleanup(func() { pd.Dealloc() })
	return s
}

// testGate is an open send gate with no injection armed, owned by the test.
type testGate struct {
	state atomic.Uint32
	busy  uint32
	inj   atomic.Pointer[atomic.Int64]
	word  atomic.Int64
}

func newTestGate() *testGate {
	g := &testGate{}
	g.inj.Store(&g.word)
	return g
}

func (g *testGate) share() failover.SendGateShare {
	return failover.SendGateShare{State: &g.state, Busy: &g.busy, Injection: &g.inj}
}

func TestSharedPostMatchesGo(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		t.Run(fmt.Sprintf("sq_sig_all=%v", sigAll), func(t *testing.T) { testSharedPost(t, sigAll) })
	}
}

func testSharedPost(t *testing.T, sigAll bool) {
	r := seeded(t)
	s := newSpostQPs(t, sigAll)
	var pin [2]runtime.Pinner
	sa, _ := s.a.ShareSend(&pin[0])
	sb, _ := s.b.ShareSend(&pin[1])
	t.Cleanup(func() { pin[0].Unpin(); pin[1].Unpin() })
	if sa.WQECount != sb.WQECount || sa.MaxPost != sb.MaxPost {
		t.Fatalf("the two QPs differ: %d/%d blocks, %d/%d WRs", sa.WQECount, sb.WQECount, sa.MaxPost, sb.MaxPost)
	}
	g := newTestGate()
	c, ok := newCheckSpost(s.b, g.share())
	if !ok {
		t.Skip("the device gave the QP a shared BlueFlame register (such QPs are left to Go)")
	}
	defer c.free()
	sameBF := sa.BF.BufSize == sb.BF.BufSize && (sa.BF.Index == 0) == (sb.BF.Index == 0)
	if !sameBF {
		t.Logf("registers differ (%+v, %+v): not compared", sa.BF, sb.BF)
	}
	maxGS, maxInline := sa.MaxGS, sa.MaxInline
	starts := make([]bool, sa.WQECount) // blocks that begin a WQE: their QPN is masked
	mark := func(sh *provider.SendShare, from, to uint32) {
		for p := from; p != to; {
			idx := p & (sa.WQECount - 1)
			n := uint32(sh.NBB[idx])
			for k := uint32(0); k < n; k++ {
				starts[(p+k)&(sa.WQECount-1)] = k == 0
			}
			p += n
		}
	}
	posted, refused, viaGo := 0, 0, 0
	for round := range 6000 {
		switch op := r.IntN(20); {
		case op < 12: // an application list
			wrs := make([]verbs.SendWR, 1+r.IntN(4))
			for i := range wrs {
				wrs[i] = randomWR(r, maxGS, maxInline, s.data, s.base)
				if r.IntN(40) == 0 { // one the provider refuses
					switch r.IntN(3) {
					case 0:
						wrs[i].Opcode = verbs.WROpcode(7 + r.IntN(3))
					case 1:
						for len(wrs[i].SGL) <= maxGS {
							wrs[i].SGL = append(wrs[i].SGL, verbs.SGE{Addr: s.base, Length: 1, LKey: 1})
						}
					default:
						wrs[i] = verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline,
							SGL: []verbs.SGE{{Addr: s.base, Length: uint32(maxInline + 1), LKey: 1}}}
					}
				}
			}
			from := *sa.CurPost
			errA := s.a.PostSend(wrs)
			var okB bool
			if r.IntN(5) == 0 {
				okB = s.b.PostSend(wrs) == nil
				viaGo++
			} else {
				okB = c.post(wrs)
			}
			if (errA == nil) != okB {
				t.Fatalf("round %d: %+v: the provider's post returned %v, the other poster accepted: %v", round, wrs, errA, okB)
			}
			if errA == nil {
				posted += len(wrs)
				mark(&sa, from, *sa.CurPost)
			} else {
				refused++
			}
		case op < 14: // an internal WR (SHIFT's own)
			wr := randomWR(r, maxGS, maxInline, s.data, s.base)
			from := *sa.CurPost
			errA := s.a.PostSendInternal([]verbs.SendWR{wr})
			errB := s.b.PostSendInternal([]verbs.SendWR{wr})
			if (errA == nil) != (errB == nil) {
				t.Fatalf("round %d: internal post: %v vs %v", round, errA, errB)
			}
			if errA == nil {
				mark(&sa, from, *sa.CurPost)
			}
		default: // completions: retire up to a random outstanding WQE, as the poller does
			done, cur := uint32(sa.Retired.Load()>>32), *sa.CurPost
			var ends []uint32
			for p := done; p != cur; p += uint32(sa.NBB[p&(sa.WQECount-1)]) {
				ends = append(ends, p)
			}
			if len(ends) == 0 {
				continue
			}
			idx := ends[r.IntN(len(ends))] & (sa.WQECount - 1)
			for _, sh := range []*provider.SendShare{&sa, &sb} {
				sh.IntRetired.Store(sh.IntAt[idx])
				sh.Retired.Store(uint64(sh.Pos[idx]+uint32(sh.NBB[idx]))<<32 | uint64(sh.WQEHead[idx]))
			}
		}
		compareShares(t, round, &sa, &sb, starts, sameBF)
		if g.busy != 0 {
			t.Fatalf("round %d: the C poster left the gate marked busy", round)
		}
	}
	if posted == 0 || refused == 0 || viaGo == 0 {
		t.Fatalf("the history did not exercise both outcomes and both posters: %d posted, %d lists refused, %d through Go", posted, refused, viaGo)
	}
	t.Logf("%d WRs posted, %d lists refused, %d lists posted through Go on the shared QP", posted, refused, viaGo)

	// What the C poster leaves to Go, writing nothing: a closed gate, an armed injection, a QP
	// not in RTS.
	sb.IntRetired.Store(*sb.Internal)
	sb.Retired.Store(uint64(*sb.CurPost)<<32 | uint64(*sb.Head))
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{{Addr: s.base, Length: 8, LKey: 1}}}}
	before := bytes.Clone(sb.Ring)
	head := *sb.Head
	g.state.Store(2)
	if c.post(wr) {
		t.Error("posted with the gate closed")
	}
	g.state.Store(0)
	g.word.Store(1)
	if c.post(wr) {
		t.Error("posted with an injection armed")
	}
	g.word.Store(0)
	if err := s.b.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if c.post(wr) {
		t.Error("posted on a QP in ERR")
	}
	if *sb.Head != head || !bytes.Equal(before, sb.Ring) || g.busy != 0 {
		t.Errorf("a post left to Go wrote to the queue (head %d → %d) or left the gate busy (%d)", head, *sb.Head, g.busy)
	}
}

// compareShares compares the two queues' state after a step.
func compareShares(t *testing.T, round int, a, b *provider.SendShare, starts []bool, sameBF bool) {
	t.Helper()
	type counters struct {
		Cur, Head, Internal, Two, Rung, IntRetired uint32
		Retired                                    uint64
		DB                                         []byte
		Offset                                     int
	}
	of := func(s *provider.SendShare) counters {
		return counters{*s.CurPost, *s.Head, *s.Internal, *s.Two, *s.Rung, s.IntRetired.Load(), s.Retired.Load(),
			bytes.Clone(s.DBRec[4:8]), *s.BFOffset}
	}
	if ca, cb := of(a), of(b); !cmp.Equal(ca, cb) {
		t.Fatalf("round %d: counters (-Go +shared):\n%s", round, cmp.Diff(ca, cb))
	}
	type tables struct {
		WRID                                []uint64
		WQEHead, Pos, IntAt, TwoAt, StartOf []uint32
		NBB                                 []uint8
		Mark                                []bool
	}
	if !slices.Equal(a.WRID, b.WRID) || !slices.Equal(a.WQEHead, b.WQEHead) || !slices.Equal(a.Pos, b.Pos) ||
		!slices.Equal(a.IntAt, b.IntAt) || !slices.Equal(a.TwoAt, b.TwoAt) || !slices.Equal(a.StartOf, b.StartOf) ||
		!slices.Equal(a.NBB, b.NBB) || !slices.Equal(a.Mark, b.Mark) {
		t.Fatalf("round %d: per-WQE tables (-Go +shared):\n%s", round, cmp.Diff(
			tables{a.WRID, a.WQEHead, a.Pos, a.IntAt, a.TwoAt, a.StartOf, a.NBB, a.Mark},
			tables{b.WRID, b.WQEHead, b.Pos, b.IntAt, b.TwoAt, b.StartOf, b.NBB, b.Mark}))
	}
	for blk := range starts {
		x, y := a.Ring[blk*mlx5.SendWQEBB:(blk+1)*mlx5.SendWQEBB], b.Ring[blk*mlx5.SendWQEBB:(blk+1)*mlx5.SendWQEBB]
		if !equalBlocks(x, y, a.QPN, b.QPN) {
			t.Fatalf("round %d: ring block %d differs (start of a WQE: %v):\nGo     % x\nshared % x", round, blk, starts[blk], x, y)
		}
	}
	if sameBF && len(a.BF.Reg) == len(b.BF.Reg) {
		// A BlueFlame copy is whole blocks of the ring: compared block by block likewise.
		for off := 0; off < len(a.BF.Reg); off += min(mlx5.SendWQEBB, len(a.BF.Reg)) {
			end := min(off+mlx5.SendWQEBB, len(a.BF.Reg))
			x, y := a.BF.Reg[off:end], b.BF.Reg[off:end]
			if !equalBlocks(x, y, a.QPN, b.QPN) {
				t.Fatalf("round %d: BlueFlame register differs at byte %d:\nGo     % x\nshared % x", round, off, x, y)
			}
		}
	}
}

// equalBlocks compares a block of each ring (or a BlueFlame half): equal, but where a
// control segment begins the block, or once did and left its QPN behind (the padding after
// inline data is not written, and inline data may have overwritten part of it), each of
// bytes 4-6 may hold its byte of each QP's own QPN.
func equalBlocks(x, y []byte, qpnA, qpnB uint32) bool {
	if bytes.Equal(x, y) {
		return true
	}
	if !bytes.Equal(x[:4], y[:4]) || !bytes.Equal(x[7:], y[7:]) {
		return false
	}
	for i := 4; i < 7; i++ {
		sh := uint(6-i) * 8
		if x[i] != y[i] && (x[i] != byte(qpnA>>sh) || y[i] != byte(qpnB>>sh)) {
			return false
		}
	}
	return true
}

// testRecvGate is an open receive gate with a receive log, owned by the test.
type testRecvGate struct {
	state  atomic.Uint32
	busy   uint32
	log    []failover.RecvLogRecord
	sge    []verbs.SGE
	posted atomic.Uint64
}

// TestSharedRecvMatchesGo is TestSharedPostMatchesGo for post_recv: the same random history
// of receive lists (some refused: too long, too many scatter entries), internal receives and
// retirements through the provider's PostRecv on one QP and through C on the other, then
// identical rings, tables, counters and doorbell records; and C's receive log holds exactly
// the receives it posted.
func TestSharedRecvMatchesGo(t *testing.T) {
	r := seeded(t)
	s := newSpostQPs(t, false)
	var pin [2]runtime.Pinner
	ra, _ := s.a.ShareRecv(&pin[0])
	rb, _ := s.b.ShareRecv(&pin[1])
	t.Cleanup(func() { pin[0].Unpin(); pin[1].Unpin() })
	maxWR := s.a.Cap().MaxRecvWR
	stride := int(s.a.Cap().MaxRecvSGE)
	g := &testRecvGate{log: make([]failover.RecvLogRecord, 64), sge: make([]verbs.SGE, 64*stride)}
	c := newCheckSrecv(s.b, failover.RecvGateShare{State: &g.state, Busy: &g.busy, MaxRecvWR: maxWR,
		Log: g.log, SGE: g.sge, Stride: stride, Posted: &g.posted})
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
	g2 := &testRecvGate{log: make([]failover.RecvLogRecord, 8), sge: make([]verbs.SGE, 8*(stride-1))}
	c2 := newCheckSrecv(s.b, failover.RecvGateShare{State: &g2.state, Busy: &g2.busy, MaxRecvWR: 2,
		Log: g2.log, SGE: g2.sge, Stride: stride - 1, Posted: &g2.posted})
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

// TestSharedPollMatchesGo: completions written into both QPs' CQs alike (requester CQEs for
// WQEs the two posted alike, responder CQEs for their receives in order, now and then an
// error or a completion of an unknown QP), polled from one CQ by the provider's Poll and from
// the other by C (spoll.c) and, for what C leaves (errors, unknown QPs), by the provider's
// Poll after it, as the plugin does: the same completions, and the same retirements,
// consumer index and doorbell record after every poll.
func TestSharedPollMatchesGo(t *testing.T) {
	r := seeded(t)
	s := newSpostQPs(t, false)
	var pin [2]runtime.Pinner
	sa, _ := s.a.ShareSend(&pin[0])
	ra, _ := s.a.ShareRecv(&pin[0])
	sb, _ := s.b.ShareSend(&pin[1])
	rb, _ := s.b.ShareRecv(&pin[1])
	pa, pb := s.cqA.SharePoll(&pin[0]), s.cqB.SharePoll(&pin[1])
	t.Cleanup(func() { pin[0].Unpin(); pin[1].Unpin() })
	sg := newTestGate()
	cs, ok := newCheckSpost(s.b, sg.share())
	if !ok {
		t.Skip("the device gave the QP a shared BlueFlame register")
	}
	defer cs.free()
	stride := int(s.b.Cap().MaxRecvSGE)
	rg := &testRecvGate{log: make([]failover.RecvLogRecord, 64), sge: make([]verbs.SGE, 64*stride)}
	cr := newCheckSrecv(s.b, failover.RecvGateShare{State: &rg.state, Busy: &rg.busy, MaxRecvWR: s.b.Cap().MaxRecvWR,
		Log: rg.log, SGE: rg.sge, Stride: stride, Posted: &rg.posted})
	defer cr.free()
	cp := newCheckSpoll(s.cqB, s.b.QPN(), cs, cr)
	defer cp.free()

	ncqe := pa.NCQE
	prod := *pa.CI        // the next CQE slot both rings get
	sendNext := uint32(0) // the position after the last WQE a requester CQE was written for
	recvNext := uint32(0) // receives a responder CQE was written for
	writeCQE := func(op uint8, reqOp mlx5.Opcode, counter uint16, qpnA, qpnB uint32) {
		var e [64]byte
		for i := range e {
			e[i] = byte(r.Uint32())
		}
		binary.BigEndian.PutUint16(e[60:], counter)
		owner := byte(0)
		if prod&ncqe != 0 {
			owner = mlx5.CQEOwnerMask
		}
		e[63] = op<<4 | owner | e[63]&0x0e
		if op == mlx5.CQEReq {
			e[56] = byte(reqOp)
		}
		for _, x := range []struct {
			buf []byte
			qpn uint32
		}{{pa.Buf, qpnA}, {pb.Buf, qpnB}} {
			slot := x.buf[int(prod&(ncqe-1))*64:][:64]
			e[57], e[58], e[59] = byte(x.qpn>>16), byte(x.qpn>>8), byte(x.qpn)
			copy(slot[:63], e[:63])
			atomic.StoreUint32((*uint32)(unsafe.Pointer(&slot[60])), binary.LittleEndian.Uint32(e[60:])) // op_own last
		}
		prod++
	}
	polledC, polledGo, errs, recvByC := 0, 0, 0, 0
	wcA := make([]verbs.WC, checkMaxWCs)
	for round := range 4000 {
		switch op := r.IntN(10); {
		case op < 3: // sends, posted alike
			wrs := []verbs.SendWR{randomWR(r, sa.MaxGS, sa.MaxInline, s.data, s.base)}
			if s.a.PostSend(wrs) == nil != cs.post(wrs) {
				t.Fatalf("round %d: the posts disagree", round)
			}
		case op < 5: // receives, posted alike
			wrs := []verbs.RecvWR{{WRID: r.Uint64(), SGL: []verbs.SGE{{Addr: s.base, Length: 64, LKey: 1}}}}
			if s.a.PostRecv(wrs) == nil != cr.post(wrs) {
				t.Fatalf("round %d: the receive posts disagree", round)
			}
		case op < 6: // SHIFT's own WRs, through Go on both
			wrs := []verbs.SendWR{randomWR(r, sa.MaxGS, sa.MaxInline, s.data, s.base)}
			if s.a.PostSendInternal(wrs) == nil != (s.b.PostSendInternal(wrs) == nil) {
				t.Fatalf("round %d: the internal posts disagree", round)
			}
			rwrs := []verbs.RecvWR{{WRID: r.Uint64()}}
			if s.a.PostRecvInternal(rwrs) == nil != (s.b.PostRecvInternal(rwrs) == nil) {
				t.Fatalf("round %d: the internal receive posts disagree", round)
			}
		default: // completions, then polls
			if sendNext == 0 {
				sendNext = uint32(sa.Retired.Load() >> 32)
			}
			for range 1 + r.IntN(4) {
				if prod-*pa.CI >= ncqe-1 {
					break
				}
				switch k := r.IntN(20); {
				case k == 0: // an error completion of the next send
					if cur := *sa.CurPost; sendNext != cur {
						writeCQE(mlx5.CQEReqErr, 0, uint16(sendNext), s.a.QPN(), s.b.QPN())
						sendNext += uint32(sa.NBB[sendNext&(sa.WQECount-1)])
						errs++
					}
				case k == 1: // a QP neither poller knows
					writeCQE(mlx5.CQEReq, mlx5.OpcodeSend, 0, 0xabcde, 0xabcde)
					errs++
				case k < 11: // a send completes: the next or a later one
					cur := *sa.CurPost
					if sendNext == cur {
						continue
					}
					p := sendNext
					for skip := r.IntN(3); skip > 0; skip-- {
						n := p + uint32(sa.NBB[p&(sa.WQECount-1)])
						if n == cur {
							break
						}
						p = n
					}
					idx := p & (sa.WQECount - 1)
					opc := mlx5.Opcode(sa.Ring[int(idx)*64+3])
					writeCQE(mlx5.CQEReq, opc, uint16(p), s.a.QPN(), s.b.QPN())
					sendNext = p + uint32(sa.NBB[idx])
				default: // the next receive completes
					if recvNext == *ra.Head {
						continue
					}
					ops := []uint8{mlx5.CQERespSend, mlx5.CQERespSendImm, mlx5.CQERespWrImm, mlx5.CQERespSendInv}
					writeCQE(ops[r.IntN(len(ops))], 0, uint16(recvNext), s.a.QPN(), s.b.QPN())
					recvNext++
				}
			}
			want := 1 + r.IntN(8)
			na, errA := s.cqA.Poll(wcA[:want])
			got := cp.poll(want)
			polledC += len(got)
			for _, w := range got {
				if w.Opcode&verbs.WCRecv != 0 {
					recvByC++
				}
			}
			if len(got) < na || errA != nil {
				// What C left: the provider's Poll, as the plugin falls back to Go.
				rest := make([]verbs.WC, want-len(got))
				nb, errB := s.cqB.Poll(rest)
				if (errA == nil) != (errB == nil) {
					t.Fatalf("round %d: poll errors differ: %v / %v", round, errA, errB)
				}
				polledGo += nb
				got = append(got, rest[:nb]...)
			}
			for i := range got {
				got[i].QPNum = remap(got[i].QPNum, s.b.QPN(), s.a.QPN())
			}
			if !cmp.Equal(wcA[:na], got) {
				t.Fatalf("round %d: completions (-Go +C):\n%s", round, cmp.Diff(wcA[:na], got))
			}
		}
		type counters struct {
			CI                                       uint32
			SetCI                                    []byte
			SendRetired                              uint64
			SendIntRetired, RecvTail, RecvIntRetired uint32
		}
		of := func(p provider.CQPollShare, sh provider.SendShare, rh provider.RecvShare) counters {
			return counters{*p.CI, bytes.Clone(p.DBRec[:4]), sh.Retired.Load(), sh.IntRetired.Load(), rh.Tail.Load(), rh.IntRetired.Load()}
		}
		if ca, cb := of(pa, sa, ra), of(pb, sb, rb); !cmp.Equal(ca, cb) {
			t.Fatalf("round %d: after the polls (-Go +C):\n%s", round, cmp.Diff(ca, cb))
		}
		if *cp.gate() != 0 {
			t.Fatalf("round %d: the C poller left the gate at %d", round, *cp.gate())
		}
	}
	if polledC == 0 || polledGo == 0 || errs == 0 {
		t.Fatalf("the history did not exercise both pollers: %d completions by C, %d by Go after it, %d errors", polledC, polledGo, errs)
	}
	if got := cp.received(); got != uint64(recvByC) {
		t.Errorf("the C poller counted %d receives completed, it returned %d", got, recvByC)
	}
	t.Logf("%d completions polled by C, %d by the provider after it, %d errors or unknown QPs", polledC, polledGo, errs)
}

func remap(q, from, to uint32) uint32 {
	if q == from {
		return to
	}
	return q
}

// TestSharedPostWords: the C poster reads Go's words by their layout (spost.h): an
// atomic.Pointer is the pointer itself, the sync/atomic integers are the integer, int is 64
// bits and bool one byte.
func TestSharedPostWords(t *testing.T) {
	var w atomic.Int64
	var p atomic.Pointer[atomic.Int64]
	p.Store(&w)
	if unsafe.Sizeof(p) != 8 || *(*unsafe.Pointer)(unsafe.Pointer(&p)) != unsafe.Pointer(&w) {
		t.Error("atomic.Pointer is not one pointer word")
	}
	w.Store(-3)
	var u64 atomic.Uint64
	u64.Store(1<<40 | 5)
	var u32 atomic.Uint32
	u32.Store(7)
	if *(*int64)(unsafe.Pointer(&w)) != -3 || *(*uint64)(unsafe.Pointer(&u64)) != 1<<40|5 || *(*uint32)(unsafe.Pointer(&u32)) != 7 ||
		unsafe.Sizeof(w) != 8 || unsafe.Sizeof(u64) != 8 || unsafe.Sizeof(u32) != 4 {
		t.Error("a sync/atomic integer is not its integer")
	}
	if unsafe.Sizeof(int(0)) != 8 || unsafe.Sizeof(true) != 1 {
		t.Errorf("int is %d bytes, bool %d: spost.h assumes 8 and 1", unsafe.Sizeof(int(0)), unsafe.Sizeof(true))
	}
}

// BenchmarkSharedPostPoll times one signaled 64-byte inline WRITE posted and its completion
// polled, with no device behind the rings (the loop writes the CQE as a NIC would): by the C
// data path of SHIFT mode (spost.c, spoll.c) in a C loop, and by the provider's PostSend and
// Poll in a Go loop, on two QPs of one stepped emulated device. No cgo call is timed, and
// neither includes the application's call into libibverbs.
func BenchmarkSharedPostPoll(b *testing.B) {
	for _, path := range []string{"c", "go"} {
		b.Run(path, func(b *testing.B) { benchSharedPostPoll(b, path == "c") })
	}
}

func benchSharedPostPoll(b *testing.B, viaC bool) {
	s := newSpostQPsTB(b)
	var pin runtime.Pinner
	defer pin.Unpin()
	if viaC {
		sg := newTestGate()
		cs, ok := newCheckSpost(s.b, sg.share())
		if !ok {
			b.Skip("a shared BlueFlame register")
		}
		defer cs.free()
		stride := int(s.b.Cap().MaxRecvSGE)
		rg := &testRecvGate{log: make([]failover.RecvLogRecord, 64), sge: make([]verbs.SGE, 64*stride)}
		cr := newCheckSrecv(s.b, failover.RecvGateShare{State: &rg.state, Busy: &rg.busy, MaxRecvWR: s.b.Cap().MaxRecvWR,
			Log: rg.log, SGE: rg.sge, Stride: stride, Posted: &rg.posted})
		defer cr.free()
		cp := newCheckSpoll(s.cqB, s.b.QPN(), cs, cr)
		defer cp.free()
		b.ResetTimer()
		if got := cp.loop(cs, s.data, b.N); got != b.N {
			b.Fatalf("%d of %d completions polled", got, b.N)
		}
		return
	}
	sh, _ := s.a.ShareSend(&pin)
	ps := s.cqA.SharePoll(&pin)
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{{Addr: s.base, Length: 64, LKey: 1}}, RemoteAddr: 0x1000, RKey: 1}}
	wcs := make([]verbs.WC, 1)
	qpn := s.a.QPN()
	b.ResetTimer()
	for range b.N {
		pos, ci := *sh.CurPost, *ps.CI
		if err := s.a.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		e := ps.Buf[int(ci&(ps.NCQE-1))*64:][:64]
		e[56], e[57], e[58], e[59] = byte(mlx5.OpcodeRDMAWrite), byte(qpn>>16), byte(qpn>>8), byte(qpn)
		e[60], e[61] = byte(pos>>8), byte(pos)
		owner := byte(0)
		if ci&ps.NCQE != 0 {
			owner = mlx5.CQEOwnerMask
		}
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&e[60])), uint32(e[60])|uint32(e[61])<<8|uint32(e[62])<<16|uint32(mlx5.CQEReq<<4|owner)<<24)
		if n, err := s.cqA.Poll(wcs); n != 1 || err != nil {
			b.Fatalf("poll: %d, %v", n, err)
		}
	}
}
