package provider

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

func TestPostSendEncodesEveryOpcode(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 4, MaxSendSGE: 3, MaxRecvSGE: 2, MaxInlineData: 64}, false)
	sq := r.qp.sq
	sge := []verbs.SGE{{Addr: 0x1000, Length: 100, LKey: 0x11}, {Addr: 0x2000, Length: 0, LKey: 0x12}, {Addr: 0x3000, Length: 7, LKey: 0x13}}
	atom := []verbs.SGE{{Addr: 0x4000, Length: 8, LKey: 0x14}}
	wrs := []verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: sge, RemoteAddr: 0xaaaa0000, RKey: 0x77},
		{WRID: 2, Opcode: verbs.WRRDMAWriteWithImm, SGL: sge[:1], RemoteAddr: 0xbbbb, RKey: 0x78, Imm: 0x01020304},
		{WRID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSolicited, SGL: sge[2:]},
		{WRID: 4, Opcode: verbs.WRSendWithImm, Flags: verbs.SendFence | verbs.SendSignaled, Imm: 0xdeadbeef},
		{WRID: 5, Opcode: verbs.WRRDMARead, SGL: sge[:1], RemoteAddr: 0xcccc, RKey: 0x79},
		{WRID: 6, Opcode: verbs.WRAtomicCmpAndSwp, SGL: atom, RemoteAddr: 0xdd00, RKey: 0x7a, CompareAdd: 5, Swap: 9},
		{WRID: 7, Opcode: verbs.WRAtomicFetchAdd, SGL: atom, RemoteAddr: 0xee00, RKey: 0x7b, CompareAdd: 3},
	}
	if err := r.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	pos := uint32(0)
	for i, wr := range wrs {
		c, wqe := r.sqWQE(t, pos)
		if c.WQEIndex != uint16(pos) || c.QPN != 0x1234 || c.Opcode != wrToMlx5[wr.Opcode] {
			t.Fatalf("wr %d: ctrl %+v", i, c)
		}
		if c.Signaled() != (wr.Flags&verbs.SendSignaled != 0) || c.Solicited() != (wr.Flags&verbs.SendSolicited != 0) ||
			c.Fenced() != (wr.Flags&verbs.SendFence != 0) {
			t.Errorf("wr %d: flags %#x for %v", i, c.FMCESE, wr.Flags)
		}
		wantImm := uint32(0)
		if wr.Opcode == verbs.WRSendWithImm || wr.Opcode == verbs.WRRDMAWriteWithImm {
			wantImm = wr.Imm
		}
		if c.Imm != wantImm {
			t.Errorf("wr %d: imm %#x want %#x", i, c.Imm, wantImm)
		}
		p := 16
		raddr, atomic, _ := c.Opcode.Segments()
		if raddr {
			rs, _ := mlx5.DecodeRaddrSeg(wqe[p:])
			if rs.RemoteAddr != wr.RemoteAddr || rs.RKey != wr.RKey {
				t.Errorf("wr %d: raddr %+v", i, rs)
			}
			p += 16
		}
		if atomic {
			as, _ := mlx5.DecodeAtomicSeg(wqe[p:])
			want := mlx5.FetchAdd(wr.CompareAdd)
			if wr.Opcode == verbs.WRAtomicCmpAndSwp {
				want = mlx5.CompareSwap(wr.CompareAdd, wr.Swap)
			}
			if as != want {
				t.Errorf("wr %d: atomic %+v want %+v", i, as, want)
			}
			p += 16
		}
		var got []verbs.SGE
		for ; p < len(wqe); p += 16 {
			d, _ := mlx5.DecodeDataSeg(wqe[p:])
			got = append(got, verbs.SGE{Addr: d.Addr, Length: d.ByteCount, LKey: d.LKey})
		}
		var want []verbs.SGE
		for _, s := range wr.SGL {
			if s.Length != 0 {
				want = append(want, s)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("wr %d: %d data segs, want %d", i, len(got), len(want))
		}
		for k := range got {
			if got[k] != want[k] {
				t.Errorf("wr %d seg %d: %+v want %+v", i, k, got[k], want[k])
			}
		}
		if sq.wrid[pos&sq.mask] != wr.WRID {
			t.Errorf("wr %d: wrid table %d", i, sq.wrid[pos&sq.mask])
		}
		pos += uint32(mlx5.WQEBBs(int(c.DS)))
	}
	if sq.cur() != pos || sq.head != uint32(len(wrs)) {
		t.Fatalf("cur %d head %d, want %d %d", sq.cur(), sq.head, pos, len(wrs))
	}
	// One doorbell for the list: the record holds the producer index and the 8-byte
	// doorbell holds the last WQE's first 8 bytes.
	if got := binary.BigEndian.Uint32(r.qp.dbrec[4:]); got != pos {
		t.Errorf("SQ dbrec %d, want %d", got, pos)
	}
	lastCtrl := int(sq.startOf[(pos-1)&sq.mask]&sq.mask) * 64
	if !bytes.Equal(r.lastDoorbell()[0:8], sq.buf[lastCtrl:lastCtrl+8]) {
		t.Errorf("doorbell % x, want % x", r.lastDoorbell()[0:8], sq.buf[lastCtrl:lastCtrl+8])
	}
	if sq.bf.CurrentOffset() != 0x900 {
		t.Errorf("BlueFlame half did not alternate")
	}
}

func TestPostSendInlineWrapsAndBlueFlame(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1, MaxInlineData: 100}, true)
	sq := r.qp.sq
	data, err := NewBuffer(256)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Free()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data.Bytes() {
		data.Bytes()[i] = byte(rng.Uint32())
	}
	// Post single 100-byte inline WRITEs (ds = 1+1+7 = 9 → 3 WQEBBs) until one wraps the ring.
	wrapped := false
	for n := 0; n < 40; n++ {
		payload := data.Bytes()[n : n+100]
		wr := []verbs.SendWR{{WRID: uint64(n), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendInline | verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: sliceAddr(payload), Length: 100}}, RemoteAddr: 0x10, RKey: 1}}
		start := sq.cur()
		if err := r.qp.PostSend(wr); err != nil {
			t.Fatalf("post %d: %v", n, err)
		}
		c, wqe := r.sqWQE(t, start)
		if c.DS != 9 {
			t.Fatalf("ds %d", c.DS)
		}
		if !mlx5.IsInline(wqe[32:]) || mlx5.InlineLen(wqe[32:]) != 100 {
			t.Fatalf("inline header % x", wqe[32:36])
		}
		if !bytes.Equal(wqe[36:136], payload) {
			t.Fatalf("post %d: inline payload differs", n)
		}
		if (start&sq.mask)+3 > sq.wqeCnt {
			wrapped = true
		}
		// BlueFlame copied the whole WQE (3 blocks = 192 bytes) into the register half used.
		if !bytes.Equal(r.lastDoorbell()[:144], wqe) {
			t.Fatalf("post %d: BlueFlame register does not hold the WQE", n)
		}
		// Complete it so the SQ never fills: a requester CQE for this WQE.
		pi := r.cq.ring.ci()
		r.nicCQE(pi, mlx5.CQE64{SopDropQPN: uint32(mlx5.OpcodeRDMAWrite)<<24 | 0x1234, WQECounter: uint16(start), OpOwn: mlx5.CQEReq << 4})
		var wc [1]verbs.WC
		if k, err := r.cq.Poll(wc[:]); k != 1 || err != nil || wc[0].WRID != uint64(n) || wc[0].Opcode != verbs.WCRDMAWrite {
			t.Fatalf("poll: %d %v %+v", k, err, wc[0])
		}
	}
	if !wrapped {
		t.Fatal("no WQE wrapped the ring end")
	}
}

func TestPostSendRejectsWithoutSideEffects(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 32}, false)
	q := r.qp
	ok := verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{{Addr: 1, Length: 1, LKey: 1}}}
	snapshot := func() []byte { return append([]byte(nil), q.mem.Bytes()...) }
	before := snapshot()
	maxInl := int(q.cap.MaxInlineData) // 60: the WQE slot rounds the request up
	big := make([]byte, maxInl+1)
	cases := []struct {
		wrs   []verbs.SendWR
		err   error
		index int
		limit int
	}{
		{[]verbs.SendWR{ok, {Opcode: verbs.WRSend, SGL: make([]verbs.SGE, 3)}}, verbs.ErrTooManySGE, 1, 2},
		{[]verbs.SendWR{ok, ok, {Opcode: verbs.WRSend, Flags: verbs.SendInline, SGL: []verbs.SGE{{Addr: sliceAddr(big), Length: uint32(maxInl + 1)}}}}, verbs.ErrInlineTooLarge, 2, maxInl},
		{[]verbs.SendWR{ok, ok, ok, ok, ok}, verbs.ErrSQFull, 4, 4},
		{[]verbs.SendWR{{Opcode: 99}}, verbs.ErrBadOpcode, 0, 0},
		{[]verbs.SendWR{{Opcode: verbs.WRAtomicFetchAdd, SGL: []verbs.SGE{{Length: 4}}}}, verbs.ErrBadAtomic, 0, 0},
	}
	for i, tc := range cases {
		err := q.PostSend(tc.wrs)
		var we *verbs.WRError
		if !errors.Is(err, tc.err) || !errors.As(err, &we) || we.Index != tc.index || we.Limit != tc.limit {
			t.Errorf("case %d: %v, want %v at %d limit %d", i, err, tc.err, tc.index, tc.limit)
		}
	}
	q.state.Store(uint32(verbs.QPStateRTR))
	if err := q.PostSend([]verbs.SendWR{ok}); !errors.Is(err, verbs.ErrQPState) {
		t.Errorf("post in RTR: %v", err)
	}
	q.state.Store(uint32(verbs.QPStateReset))
	if err := q.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, verbs.ErrQPState) {
		t.Errorf("recv in RESET: %v", err)
	}
	q.state.Store(uint32(verbs.QPStateRTS))
	if err := q.PostRecv([]verbs.RecvWR{{SGL: make([]verbs.SGE, 2)}}); !errors.Is(err, verbs.ErrTooManySGE) {
		t.Errorf("recv 2 SGEs: %v", err)
	}
	if err := q.PostRecv(make([]verbs.RecvWR, 5)); !errors.Is(err, verbs.ErrRQFull) {
		t.Errorf("recv overflow: %v", err)
	}
	if !bytes.Equal(before, snapshot()) || q.sq.cur() != 0 || q.sq.head != 0 || q.rq.head != 0 {
		t.Fatal("a rejected post changed the rings")
	}
	if binary.BigEndian.Uint64(q.dbrec) != 0 {
		t.Fatal("a rejected post touched the doorbell record")
	}
}

func TestPostRecvAndResponderCompletions(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 3}, false)
	q := r.qp
	wrs := []verbs.RecvWR{
		{WRID: 10, SGL: []verbs.SGE{{Addr: 0x100, Length: 64, LKey: 5}}},
		{WRID: 11, SGL: []verbs.SGE{{Addr: 0x200, Length: 8, LKey: 6}, {Addr: 0x300, Length: 8, LKey: 7}, {Addr: 0x400, Length: 8, LKey: 8}}},
	}
	if err := q.PostRecv(wrs); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(q.dbrec[0:]) != 2 {
		t.Fatalf("RQ dbrec %d", binary.BigEndian.Uint32(q.dbrec[0:]))
	}
	stride := 1 << q.rq.shift
	d0, _ := mlx5.DecodeDataSeg(q.rq.buf[0:])
	t0, _ := mlx5.DecodeDataSeg(q.rq.buf[16:])
	if d0 != (mlx5.DataSeg{ByteCount: 64, LKey: 5, Addr: 0x100}) || !t0.IsTerminator() {
		t.Fatalf("rwqe0 %+v %+v", d0, t0)
	}
	d2, _ := mlx5.DecodeDataSeg(q.rq.buf[stride+32:])
	if d2.Addr != 0x400 {
		t.Fatalf("rwqe1 seg2 %+v", d2)
	}
	// The NIC completes them: a SEND with immediate into wqe 0, an RDMA WRITE with
	// immediate into wqe 1, then the responder flush of nothing else.
	r.nicCQE(0, mlx5.CQE64{OpOwn: mlx5.CQERespSendImm << 4, SopDropQPN: 0x1234, ByteCnt: 50,
		ImmInvalPKey: 0xcafe, FlagsRQPN: 2<<28 | 3<<24 | 0x99, WQECounter: 0})
	r.nicCQE(1, mlx5.CQE64{OpOwn: mlx5.CQERespWrImm << 4, SopDropQPN: 0x1234, ByteCnt: 0,
		ImmInvalPKey: 0xbeef, FlagsRQPN: 0x99, WQECounter: 1})
	var wc [4]verbs.WC
	n, err := r.cq.Poll(wc[:])
	if n != 2 || err != nil {
		t.Fatalf("poll %d %v", n, err)
	}
	want0 := verbs.WC{WRID: 10, Opcode: verbs.WCRecv, ByteLen: 50, Imm: 0xcafe, QPNum: 0x1234, SrcQP: 0x99, SL: 3, Flags: verbs.WCFlagWithImm | verbs.WCFlagGRH}
	want1 := verbs.WC{WRID: 11, Opcode: verbs.WCRecvRDMAWithImm, Imm: 0xbeef, QPNum: 0x1234, SrcQP: 0x99, Flags: verbs.WCFlagWithImm}
	if wc[0] != want0 || wc[1] != want1 {
		t.Fatalf("wc\n%+v\n%+v", wc[0], wc[1])
	}
	if q.rq.tail.Load() != 2 || r.cq.ring.db.ConsumerIndex() != 2 {
		t.Fatalf("rq tail %d set_ci %d", q.rq.tail.Load(), r.cq.ring.db.ConsumerIndex())
	}
}

// Every syndrome maps to the status libmlx5 reports, and an unsignaled run is retired by the
// completion of the signaled WQE that follows it.
func TestErrorCompletionsAndUnsignaledRetire(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}, false)
	q := r.qp
	wr := verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{{Addr: 1, Length: 1}}}
	for i := 0; i < 3; i++ {
		wr.WRID = uint64(i)
		if err := q.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	if q.sq.head-q.sq.tail() != 3 {
		t.Fatal("outstanding")
	}
	// Error CQE for the third WQE (position 8: each WQE takes 4 WQEBBs? no: ds 3 → 1 block).
	last := q.sq.startOf[(q.sq.cur()-1)&q.sq.mask]
	r.nicCQE(0, mlx5.CQE64{OpOwn: mlx5.CQEReqErr << 4, SopDropQPN: uint32(mlx5.OpcodeRDMAWrite)<<24 | 0x1234,
		WQECounter: uint16(last), Syndrome: mlx5.SyndromeRemoteAccessErr, VendorSyndrome: 0x88})
	var wc [2]verbs.WC
	n, err := r.cq.Poll(wc[:])
	if n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if wc[0] != (verbs.WC{WRID: 2, Status: verbs.WCRemAccessErr, VendorErr: 0x88, QPNum: 0x1234}) {
		t.Fatalf("%+v", wc[0])
	}
	if wc[0].Status.String() != "remote access error" {
		t.Errorf("status string %q", wc[0].Status)
	}
	if q.sq.tail() != 3 || q.sq.done() != q.sq.cur() {
		t.Fatalf("tail %d done %d cur %d", q.sq.tail(), q.sq.done(), q.sq.cur())
	}
	for syn, want := range map[uint8]verbs.WCStatus{
		mlx5.SyndromeLocalLengthErr: verbs.WCLocLenErr, mlx5.SyndromeLocalQPOpErr: verbs.WCLocQPOpErr,
		mlx5.SyndromeLocalProtErr: verbs.WCLocProtErr, mlx5.SyndromeWRFlushErr: verbs.WCWRFlushErr,
		mlx5.SyndromeMWBindErr: verbs.WCMWBindErr, mlx5.SyndromeBadRespErr: verbs.WCBadRespErr,
		mlx5.SyndromeLocalAccessErr: verbs.WCLocAccessErr, mlx5.SyndromeRemoteInvalReqErr: verbs.WCRemInvReqErr,
		mlx5.SyndromeRemoteAccessErr: verbs.WCRemAccessErr, mlx5.SyndromeRemoteOpErr: verbs.WCRemOpErr,
		mlx5.SyndromeTransportRetryExc: verbs.WCRetryExcErr, mlx5.SyndromeRNRRetryExc: verbs.WCRNRRetryExcErr,
		mlx5.SyndromeRemoteAbortedErr: verbs.WCRemAbortErr, 0x77: verbs.WCGeneralErr,
	} {
		if err := q.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		pi := r.cq.ring.ci()
		r.nicCQE(pi, mlx5.CQE64{OpOwn: mlx5.CQEReqErr << 4, SopDropQPN: 0x1234, WQECounter: uint16(q.sq.cur() - 1), Syndrome: syn})
		if n, _ := r.cq.Poll(wc[:1]); n != 1 || wc[0].Status != want {
			t.Errorf("syndrome %#x: %v, want %v", syn, wc[0].Status, want)
		}
	}
}

// The CQ ring wraps many times: the owner bit parity flips each pass and the poller only takes
// CQEs of the current pass.
func TestPollOwnershipAcrossWraps(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}, false)
	q := r.qp
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled}}
	var wc [1]verbs.WC
	ncqe := r.cq.ring.ncqe
	for i := uint32(0); i < 3*ncqe+5; i++ {
		wr[0].WRID = uint64(i)
		if err := q.PostSend(wr); err != nil {
			t.Fatal(i, err)
		}
		if n, _ := r.cq.Poll(wc[:]); n != 0 {
			t.Fatalf("%d: polled a stale CQE of the previous pass", i)
		}
		r.nicCQE(i, mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: uint32(mlx5.OpcodeSend)<<24 | 0x1234, WQECounter: uint16(q.sq.cur() - 1)})
		if n, err := r.cq.Poll(wc[:]); n != 1 || err != nil || wc[0].WRID != uint64(i) || wc[0].Opcode != verbs.WCSend {
			t.Fatalf("%d: %d %v %+v", i, n, err, wc[0])
		}
	}
}

func TestPollUnknownQPN(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}, false)
	r.nicCQE(0, mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: 0x999})
	var wc [1]verbs.WC
	if _, err := r.cq.Poll(wc[:]); !errors.Is(err, verbs.ErrCQOverrun) {
		t.Fatalf("err %v", err)
	}
}

func TestDataPathAllocatesNothing(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}, true)
	q := r.qp
	payload, _ := NewBuffer(64)
	defer payload.Free()
	wrs := make([]verbs.SendWR, 8)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{{Addr: payload.Addr(), Length: 64, LKey: 1}}, RemoteAddr: 1, RKey: 2}
	}
	inl := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendInline, SGL: wrs[0].SGL, RemoteAddr: 1, RKey: 2}}
	rwr := []verbs.RecvWR{{SGL: wrs[0].SGL}}
	var wc [4]verbs.WC
	check := func(name string, f func()) {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocs/op", name, a)
		}
	}
	check("PostSend inline", func() { mustPost(t, q.PostSend(inl)); resetSQ(q) })
	check("PostSend list of 8", func() { mustPost(t, q.PostSend(wrs)); resetSQ(q) })
	check("PostRecv", func() { mustPost(t, q.PostRecv(rwr)); q.rq.tail.Store(q.rq.head) })
	check("Poll empty", func() { r.cq.Poll(wc[:]) })
	check("Poll one", func() {
		mustPost(t, q.PostSend(wrs[:1]))
		r.nicCQE(r.cq.ring.ci(), mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: uint32(mlx5.OpcodeRDMAWrite)<<24 | 0x1234, WQECounter: uint16(q.sq.cur() - 1)})
		if n, _ := r.cq.Poll(wc[:]); n != 1 {
			t.Fatal("no completion")
		}
	})
}

func mustPost(t testing.TB, err error) {
	if err != nil {
		t.Fatal(err)
	}
}

// resetSQ retires everything posted, as if the NIC had completed it, so benchmarks and
// allocation tests can post forever.
func resetSQ(q *QP) {
	q.sq.setRetired(q.sq.cur(), q.sq.head)
}

// A QP created without a receive queue (or without a send queue) refuses posts on the
// missing queue and answers the SHIFT ring operations without touching memory.
func TestMissingQueues(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}, false)
	if err := r.qp.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, verbs.ErrRQFull) {
		t.Fatalf("recv on a QP without RQ: %v", err)
	}
	if len(r.qp.OutstandingRecvs(nil)) != 0 {
		t.Fatal("outstanding receives on a QP without RQ")
	}
	s := newRingQP(t, verbs.QPCap{MaxRecvWR: 4, MaxRecvSGE: 1}, false)
	if err := s.qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend}}); !errors.Is(err, verbs.ErrSQFull) {
		t.Fatalf("send on a QP without SQ: %v", err)
	}
	if s.qp.SendProducer() != 0 || len(s.qp.OutstandingSends(nil)) != 0 || s.qp.SendWRID(3) != 0 {
		t.Fatal("SQ state on a QP without SQ")
	}
	if err := s.qp.RingSendDoorbell(1); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("ring without SQ: %v", err)
	}
	if _, err := r.qp.CopySendWQE(s.qp, 0, WQERewrite{}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("copy from a QP without SQ: %v", err)
	}
	if _, err := s.qp.ReadSendWQE(0, make([]byte, 64)); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("read WQE without SQ: %v", err)
	}
}
