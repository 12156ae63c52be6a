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

// spostShares is what the QPs of an spostQPs (a, b) and their CQs share with a second poster
// or poller, pinned until the test ends.
type spostShares struct {
	sa, sb provider.SendShare
	ra, rb provider.RecvShare
	pa, pb provider.CQPollShare
}

func (s *spostQPs) shares(t testing.TB) spostShares {
	var pin [2]runtime.Pinner
	t.Cleanup(func() { pin[0].Unpin(); pin[1].Unpin() })
	var x spostShares
	x.sa, _ = s.a.ShareSend(&pin[0])
	x.ra, _ = s.a.ShareRecv(&pin[0])
	x.pa = s.cqA.SharePoll(&pin[0])
	x.sb, _ = s.b.ShareSend(&pin[1])
	x.rb, _ = s.b.ShareRecv(&pin[1])
	x.pb = s.cqB.SharePoll(&pin[1])
	return x
}

func newSpostQPs(t *testing.T, sigAll bool) *spostQPs { return newSpostQPsOn(t, sigAll, false) }

// newSpostQPsTB is newSpostQPs for benchmarks.
func newSpostQPsTB(b *testing.B) *spostQPs { return newSpostQPsOn(b, false, false) }

// newSpostQPsOn is newSpostQPs; shared opens the context with four BlueFlame registers and
// none of them low-latency (MLX5_TOTAL_UUARS=4, MLX5_NUM_LOW_LAT_UUARS=0), so the QPs ring
// registers shared between QPs, under their lock.
func newSpostQPsOn(t testing.TB, sigAll, shared bool) *spostQPs {
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
	var opts provider.Options
	if shared {
		zero := 0
		opts.TotalBfregs, opts.LowLatencyBfregs = 4, &zero
	}
	ctx, err := provider.OpenWith(prefix+"0", opts)
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

// testGate is an open send gate, owned by the test.
type testGate struct {
	state atomic.Uint32
	busy  uint32
}

func newTestGate() *testGate { return &testGate{} }

func (g *testGate) share() failover.SendGateShare {
	return failover.SendGateShare{State: &g.state, Busy: &g.busy}
}

func TestSharedPostMatchesGo(t *testing.T) {
	for _, shared := range []bool{false, true} {
		for _, sigAll := range []bool{false, true} {
			t.Run(fmt.Sprintf("shared_register=%v/sq_sig_all=%v", shared, sigAll), func(t *testing.T) { testSharedPost(t, sigAll, shared) })
		}
	}
}

func testSharedPost(t *testing.T, sigAll, shared bool) {
	r := seeded(t)
	s := newSpostQPsOn(t, sigAll, shared)
	sh := s.shares(t)
	sa, sb := sh.sa, sh.sb
	if sa.WQECount != sb.WQECount || sa.MaxPost != sb.MaxPost {
		t.Fatalf("the two QPs differ: %d/%d blocks, %d/%d WRs", sa.WQECount, sb.WQECount, sa.MaxPost, sb.MaxPost)
	}
	if sb.BF.NeedLock != shared {
		t.Fatalf("the C poster's QP rings register %d, shared between QPs: %v; want %v", sb.BF.Index, sb.BF.NeedLock, shared)
	}
	g := newTestGate()
	c, ok := newCheckSpost(s.b, g.share())
	if !ok {
		t.Fatal("the QP has no send queue")
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

	// What the C poster leaves to Go, writing nothing: a closed gate (an armed injection's
	// too), a QP not in RTS.
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

// TestSharedPostWords: the C poster reads Go's words by their layout (spost.h): an
// atomic.Pointer is the pointer itself, the sync/atomic integers are the integer, int is 64
// bits and bool one byte; and its constants are the Go ones (gate values, QP states, the
// provider's send mark).
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
	if checkGateOpen != failover.GateOpen || checkGateBusy != failover.GateBusy {
		t.Errorf("spost.h's gate values %d/%d, the failover layer's %d/%d", checkGateOpen, checkGateBusy, failover.GateOpen, failover.GateBusy)
	}
	if checkQPSInit != int(verbs.QPStateInit) || checkQPSRTS != int(verbs.QPStateRTS) || checkQPSSQD != int(verbs.QPStateSQD) {
		t.Errorf("spost.h's QP states INIT %d, RTS %d, SQD %d; verbs' %d, %d, %d", checkQPSInit, checkQPSRTS, checkQPSSQD,
			verbs.QPStateInit, verbs.QPStateRTS, verbs.QPStateSQD)
	}
	if checkSendMark != int(provider.SendMark) {
		t.Errorf("spost.h's SHIFT_SEND_MARK %#x, provider.SendMark %#x", checkSendMark, provider.SendMark)
	}
	if unsafe.Sizeof(int(0)) != 8 || unsafe.Sizeof(true) != 1 {
		t.Errorf("int is %d bytes, bool %d: spost.h assumes 8 and 1", unsafe.Sizeof(int(0)), unsafe.Sizeof(true))
	}
}

// TestSharedPostTakesRegisterLock: on a register shared between QPs the C poster rings under
// the register's lock, the same word Go's posts take (mlx5.BFReg.LockWord). With the lock
// held, a C post writes its WQE and doorbell record and then waits, the register untouched;
// released, it rings and releases the lock.
func TestSharedPostTakesRegisterLock(t *testing.T) {
	s := newSpostQPsOn(t, false, true)
	var pin runtime.Pinner
	defer pin.Unpin()
	sb, _ := s.b.ShareSend(&pin)
	if !sb.BF.NeedLock {
		t.Fatal("the QP's register is its own; want one shared between QPs")
	}
	g := newTestGate()
	c, ok := newCheckSpost(s.b, g.share())
	if !ok {
		t.Fatal("the QP has no send queue")
	}
	defer c.free()
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: 0x1000, RKey: 1,
		SGL: []verbs.SGE{{Addr: s.base, Length: 64, LKey: 1}}}}
	counter := func() uint32 { return binary.BigEndian.Uint32(sb.DBRec[4:8]) }
	if !atomic.CompareAndSwapUint32(sb.BFLock, 0, 1) {
		t.Fatal("the register's lock is held before the test")
	}
	reg, off, before := bytes.Clone(sb.BF.Reg), *sb.BFOffset, counter()
	done := make(chan bool, 1)
	go func() { done <- c.post(wr) }()
	deadline := time.Now().Add(10 * time.Second)
	for counter() == before {
		if time.Now().After(deadline) {
			atomic.StoreUint32(sb.BFLock, 0)
			t.Fatal("the C post did not advance the doorbell record within 10 s")
		}
		runtime.Gosched()
	}
	select {
	case <-done:
		t.Fatal("the C post returned while the register's lock was held")
	default:
	}
	if !bytes.Equal(reg, sb.BF.Reg) || *sb.BFOffset != off {
		t.Error("the C post wrote the register without its lock")
	}
	atomic.StoreUint32(sb.BFLock, 0)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the C post left the list to Go")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the C post did not return within 10 s of the lock's release")
	}
	if bytes.Equal(reg, sb.BF.Reg) || *sb.BFOffset == off && sb.BF.BufSize != 0 || atomic.LoadUint32(sb.BFLock) != 0 {
		t.Errorf("after the release: register written %v, halves alternated %v, lock word %d",
			!bytes.Equal(reg, sb.BF.Reg), *sb.BFOffset != off, atomic.LoadUint32(sb.BFLock))
	}
}
