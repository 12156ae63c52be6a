package provider

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// TestRetainSends: on a retaining SQ an error completion retires the WQEs before the failed
// one and holds the failed one and the flushed ones, holding their slots, until a reset; the
// two-sided count survives the reset.
func TestRetainSends(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 16, MaxSendSGE: 1}, false)
	q := r.qp
	q.SetRetainSends(true)
	sge := []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 0x100}}
	wrs := []verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRSend, SGL: sge},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, SGL: sge, RKey: 5, Flags: SendMark},
		{WRID: 3, Opcode: verbs.WRSendWithImm, SGL: sge, Flags: verbs.SendSignaled},
		{WRID: 4, Opcode: verbs.WRRDMAWriteWithImm, SGL: sge, RKey: 5},
	}
	mustPost(t, q.PostSend(wrs))
	if err := q.PostSendInternal([]verbs.SendWR{{WRID: 5, Opcode: verbs.WRSend, Flags: verbs.SendSignaled}}); err != nil {
		t.Fatal(err)
	}
	out := q.OutstandingSends(nil)
	if len(out) != 5 {
		t.Fatalf("outstanding %+v", out)
	}
	type view struct {
		WRID             uint64
		Internal, Marked bool
		TwoSeq           uint32
	}
	var got []view
	for _, w := range out {
		got = append(got, view{w.WRID, w.Internal, w.Marked, w.TwoSeq})
	}
	want := []view{{1, false, false, 0}, {2, false, true, 1}, {3, false, false, 1}, {4, false, false, 2}, {5, true, false, 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("outstanding (-want +got):\n%s", d)
	}
	if q.TwoSidedPosted() != 3 {
		t.Fatalf("two-sided posted %d", q.TwoSidedPosted())
	}
	if _, due := q.SignaledDue(); !due {
		t.Fatal("SignaledDue: not due with signaled WQEs posted")
	}
	// WR 2 fails (1 completed silently before it), 3, 4 and 5 are flushed.
	r.nicCQE(0, mlx5.CQE64{OpOwn: mlx5.CQEReqErr << 4, SopDropQPN: 0x1234, WQECounter: uint16(out[1].Pos), Syndrome: mlx5.SyndromeRemoteAccessErr})
	r.nicCQE(1, mlx5.CQE64{OpOwn: mlx5.CQEReqErr << 4, SopDropQPN: 0x1234, WQECounter: uint16(out[2].Pos), Syndrome: mlx5.SyndromeWRFlushErr})
	var wc [4]verbs.WC
	if n, err := r.cq.Poll(wc[:]); n != 2 || err != nil || wc[0].WRID != 2 || wc[1].WRID != 3 || wc[1].Status != verbs.WCWRFlushErr {
		t.Fatalf("poll %d %v %+v", n, err, wc[:n])
	}
	held := q.OutstandingSends(nil)
	if len(held) != 4 || held[0].WRID != 2 || !held[0].Completed || !held[1].Completed || held[2].Completed || held[3].Completed {
		t.Fatalf("held %+v", held)
	}
	if q.sq.tail() != 1 || q.sq.intRetired.Load() != 0 {
		t.Fatalf("tail %d, internal retired %d", q.sq.tail(), q.sq.intRetired.Load())
	}
	r1, due := q.SignaledDue()
	if !due {
		t.Fatal("SignaledDue: not due with WR 5's completion not polled")
	}
	r.nicCQE(2, mlx5.CQE64{OpOwn: mlx5.CQEReqErr << 4, SopDropQPN: 0x1234, WQECounter: uint16(out[3].Pos), Syndrome: mlx5.SyndromeWRFlushErr})
	r.nicCQE(3, mlx5.CQE64{OpOwn: mlx5.CQEReqErr << 4, SopDropQPN: 0x1234, WQECounter: uint16(out[4].Pos), Syndrome: mlx5.SyndromeWRFlushErr})
	if n, _ := r.cq.Poll(wc[:]); n != 2 {
		t.Fatalf("poll %d", n)
	}
	held = q.OutstandingSends(held[:0])
	if len(held) != 4 || !held[3].Completed {
		t.Fatalf("held %+v", held)
	}
	// Held WQEs whose completions were polled wait for nothing: the watchdog must not take
	// them for a silent device (it did, on a failed QP the application had stopped).
	if r2, due := q.SignaledDue(); due || r2 == r1 {
		t.Fatalf("SignaledDue: due %v with every signaled WQE's completion polled (held), progress %d → %d", due, r1, r2)
	}
	if q.sq.head-q.sq.tail() != 4 {
		t.Fatalf("held WQEs must keep their slots: %d outstanding", q.sq.head-q.sq.tail())
	}
	if q.SendResets() != 0 {
		t.Fatalf("SendResets %d before any reset", q.SendResets())
	}
	q.resetIndices()
	if rest := q.OutstandingSends(nil); len(rest) != 0 || q.sq.holding.Load() || q.TwoSidedPosted() != 3 {
		t.Fatalf("after reset %+v, holding %v, two-sided %d", rest, q.sq.holding.Load(), q.TwoSidedPosted())
	}
	// The positions start again: a position read before the reset names another WQE now.
	if q.SendResets() != 1 || q.SendProducer() != 0 {
		t.Fatalf("after reset: SendResets %d, producer %d", q.SendResets(), q.SendProducer())
	}
	// Without retention the error completion retires its WQE (the plain provider).
	q.SetRetainSends(false)
	mustPost(t, q.PostSend(wrs[:1]))
	p := q.sq.cur() - 1
	r.nicCQE(4, mlx5.CQE64{OpOwn: mlx5.CQEReqErr << 4, SopDropQPN: 0x1234, WQECounter: uint16(p), Syndrome: mlx5.SyndromeRemoteAccessErr})
	if n, _ := r.cq.Poll(wc[:]); n != 1 || len(q.OutstandingSends(nil)) != 0 {
		t.Fatalf("plain: %d completions, %d outstanding", n, len(q.OutstandingSends(nil)))
	}
}

// TestCopiedWQEIdenticalToFreshPost is the differential test of SHIFT's repost: a WQE copied
// from one QP's ring (keys and QPN rewritten) is byte-identical to the WQE a fresh post of
// the same WR, with the rewritten keys, writes on the destination; and DecodeSendWQE gives
// that WR back, as DecodeSendWQEInto does into the caller's array.
func TestCopiedWQEIdenticalToFreshPost(t *testing.T) {
	caps := verbs.QPCap{MaxSendWR: 32, MaxSendSGE: 3, MaxInlineData: 64}
	src := newRingQP(t, caps, false)
	copyDst := newRingQP(t, caps, false)
	fresh := newRingQP(t, caps, false)
	for _, r := range []*ringQP{copyDst, fresh} {
		r.qp.qpn, r.qp.sq.qpn = 0x4321, 0x4321
	}
	payload := bytes.Repeat([]byte("shift"), 9)
	inl := []verbs.SGE{{Addr: sliceAddr(payload), Length: uint32(len(payload))}}
	sgl := []verbs.SGE{{Addr: 0x1000, Length: 100, LKey: 0x100}, {Addr: 0x2000, Length: 7, LKey: 0x200}, {Addr: 0x3000, Length: 1, LKey: 0x300}}
	wrs := []verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, SGL: sgl, RemoteAddr: 0x9000, RKey: 0x60},
		{WRID: 2, Opcode: verbs.WRRDMAWriteWithImm, SGL: sgl[:1], RemoteAddr: 0x9100, RKey: 0x61, Imm: 0xdeadbeef, Flags: verbs.SendSignaled},
		{WRID: 3, Opcode: verbs.WRSend, SGL: inl, Flags: verbs.SendInline | verbs.SendSolicited},
		{WRID: 4, Opcode: verbs.WRSendWithImm, SGL: sgl[1:], Imm: 7},
		{WRID: 5, Opcode: verbs.WRRDMAWrite, SGL: inl, RemoteAddr: 0x9200, RKey: 0x62, Flags: verbs.SendInline | verbs.SendSignaled},
		{WRID: 6, Opcode: verbs.WRRDMARead, SGL: sgl[:2], RemoteAddr: 0x9300, RKey: 0x63},
		{WRID: 7, Opcode: verbs.WRSend, SGL: sgl[2:], Flags: verbs.SendFence | verbs.SendSignaled},
		{WRID: 8, Opcode: verbs.WRSend},
		{WRID: 9, Opcode: verbs.WRAtomicCmpAndSwp, SGL: []verbs.SGE{{Addr: 0x4000, Length: 8, LKey: 0x400}}, RemoteAddr: 0x9400, RKey: 0x64, CompareAdd: 3, Swap: 4},
		{WRID: 10, Opcode: verbs.WRAtomicFetchAdd, SGL: []verbs.SGE{{Addr: 0x4000, Length: 8, LKey: 0x400}}, RemoteAddr: 0x9408, RKey: 0x64, CompareAdd: 5},
	}
	lkey := func(k uint32) uint32 { return k ^ 0xabc000 }
	rkey := func(k uint32) uint32 { return k + 0x7700 }
	// Offset the destinations so the copies wrap differently from the source.
	for _, r := range []*ringQP{copyDst, fresh} {
		mustPost(t, r.qp.PostSend([]verbs.SendWR{{WRID: 99, Opcode: verbs.WRSend, Flags: verbs.SendSignaled}}))
	}
	for _, w := range wrs {
		mustPost(t, src.qp.PostSend([]verbs.SendWR{w}))
		pos := src.qp.sq.startOf[(src.qp.SendProducer()-1)&src.qp.sq.mask]
		var buf [mlx5.MaxDS * mlx5.SegSize]byte
		n, err := src.qp.ReadSendWQE(pos, buf[:])
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeSendWQE(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		// DecodeSendWQEInto gives the same, its gather list in the caller's array.
		arena := make([]verbs.SGE, 0, 4)
		di, err := DecodeSendWQEInto(buf[:n], arena)
		if err != nil {
			t.Fatal(err)
		}
		if w.Flags&verbs.SendInline != 0 {
			di.WR.SGL = d.WR.SGL // the address of each decode's own copy of the bytes
		}
		if diff := cmp.Diff(d, di); diff != "" {
			t.Fatalf("wr %d: DecodeSendWQEInto differs from DecodeSendWQE (-plain +into):\n%s", w.WRID, diff)
		}
		if w.Flags&verbs.SendInline == 0 && len(di.WR.SGL) > 0 && &di.WR.SGL[0] != &arena[:1][0] {
			t.Fatalf("wr %d: gather list not in the caller's array", w.WRID)
		}
		want := w
		want.WRID = 0
		if w.Flags&verbs.SendInline != 0 {
			if !bytes.Equal(d.Inline, payload) {
				t.Fatalf("wr %d: inline %q", w.WRID, d.Inline)
			}
			want.SGL = d.WR.SGL
		}
		if want.SGL == nil {
			want.SGL = d.WR.SGL
		}
		if diff := cmp.Diff(want, d.WR); diff != "" {
			t.Fatalf("wr %d decoded (-want +got):\n%s", w.WRID, diff)
		}
		if _, err := copyDst.qp.CopySendWQE(src.qp, pos, WQERewrite{LKey: lkey, RKey: rkey}); err != nil {
			t.Fatal(err)
		}
		fw := w
		fw.SGL = nil
		for _, s := range w.SGL {
			if w.Flags&verbs.SendInline == 0 {
				s.LKey = lkey(s.LKey)
			}
			fw.SGL = append(fw.SGL, s)
		}
		if fw.RKey != 0 {
			fw.RKey = rkey(fw.RKey)
		}
		mustPost(t, fresh.qp.PostSend([]verbs.SendWR{fw}))
		cp := copyDst.qp.sq.startOf[(copyDst.qp.SendProducer()-1)&copyDst.qp.sq.mask]
		fp := fresh.qp.sq.startOf[(fresh.qp.SendProducer()-1)&fresh.qp.sq.mask]
		if cp != fp {
			t.Fatalf("wr %d: copy at %d, fresh post at %d", w.WRID, cp, fp)
		}
		_, a := copyDst.sqWQE(t, cp)
		_, b := fresh.sqWQE(t, fp)
		if !bytes.Equal(a, b) {
			t.Fatalf("wr %d: copied WQE differs from a fresh post:\ncopy  %x\nfresh %x", w.WRID, a, b)
		}
		if copyDst.qp.sq.wrid[cp&copyDst.qp.sq.mask] != w.WRID {
			t.Fatalf("wr %d: copy recorded wr_id %d", w.WRID, copyDst.qp.sq.wrid[cp&copyDst.qp.sq.mask])
		}
	}
	if copyDst.qp.TwoSidedPosted() != fresh.qp.TwoSidedPosted() {
		t.Fatalf("two-sided counts: copy %d, fresh %d", copyDst.qp.TwoSidedPosted(), fresh.qp.TwoSidedPosted())
	}
}

// TestCQEmpty: Empty follows the ring through a completion, its poll and the wrap of the
// owner bit, as CompletionWaiting does.
func TestCQEmpty(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 16, MaxSendSGE: 1}, false)
	var wc [1]verbs.WC
	ncqe := r.cq.ring.ncqe
	for i := uint32(0); i < 2*ncqe+3; i++ {
		if !r.cq.Empty() || r.cq.CompletionWaiting() {
			t.Fatalf("round %d: a fresh entry is not empty", i)
		}
		mustPost(t, r.qp.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled}}))
		r.nicCQE(i, mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: uint32(mlx5.OpcodeSend)<<24 | 0x1234, WQECounter: uint16(r.qp.sq.cur() - 1)})
		if r.cq.Empty() || !r.cq.CompletionWaiting() {
			t.Fatalf("round %d: a written CQE looks empty", i)
		}
		if n, err := r.cq.Poll(wc[:]); n != 1 || err != nil || wc[0].WRID != uint64(i) {
			t.Fatalf("round %d: poll %d %v %+v", i, n, err, wc[0])
		}
	}
}
