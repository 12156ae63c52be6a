package provider

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
)

func TestPostSendEncodesEveryOpcode(t *testing.T) {
	r := newRingQP(t, QPCap{MaxSendWR: 64, MaxRecvWR: 4, MaxSendSGE: 3, MaxRecvSGE: 2, MaxInlineData: 64}, false)
	sq := r.qp.sq
	sge := []SGE{{Addr: 0x1000, Length: 100, LKey: 0x11}, {Addr: 0x2000, Length: 0, LKey: 0x12}, {Addr: 0x3000, Length: 7, LKey: 0x13}}
	atom := []SGE{{Addr: 0x4000, Length: 8, LKey: 0x14}}
	wrs := []SendWR{
		{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: sge, RemoteAddr: 0xaaaa0000, RKey: 0x77},
		{WRID: 2, Opcode: WRRDMAWriteWithImm, SGL: sge[:1], RemoteAddr: 0xbbbb, RKey: 0x78, Imm: 0x01020304},
		{WRID: 3, Opcode: WRSend, Flags: SendSolicited, SGL: sge[2:]},
		{WRID: 4, Opcode: WRSendWithImm, Flags: SendFence | SendSignaled, Imm: 0xdeadbeef},
		{WRID: 5, Opcode: WRRDMARead, SGL: sge[:1], RemoteAddr: 0xcccc, RKey: 0x79},
		{WRID: 6, Opcode: WRAtomicCmpAndSwp, SGL: atom, RemoteAddr: 0xdd00, RKey: 0x7a, CompareAdd: 5, Swap: 9},
		{WRID: 7, Opcode: WRAtomicFetchAdd, SGL: atom, RemoteAddr: 0xee00, RKey: 0x7b, CompareAdd: 3},
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
		if c.Signaled() != (wr.Flags&SendSignaled != 0) || c.Solicited() != (wr.Flags&SendSolicited != 0) ||
			c.Fenced() != (wr.Flags&SendFence != 0) {
			t.Errorf("wr %d: flags %#x for %v", i, c.FMCESE, wr.Flags)
		}
		wantImm := uint32(0)
		if wr.Opcode == WRSendWithImm || wr.Opcode == WRRDMAWriteWithImm {
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
			if wr.Opcode == WRAtomicCmpAndSwp {
				want = mlx5.CompareSwap(wr.CompareAdd, wr.Swap)
			}
			if as != want {
				t.Errorf("wr %d: atomic %+v want %+v", i, as, want)
			}
			p += 16
		}
		var got []SGE
		for ; p < len(wqe); p += 16 {
			d, _ := mlx5.DecodeDataSeg(wqe[p:])
			got = append(got, SGE{Addr: d.Addr, Length: d.ByteCount, LKey: d.LKey})
		}
		var want []SGE
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
	r := newRingQP(t, QPCap{MaxSendWR: 4, MaxSendSGE: 1, MaxInlineData: 100}, true)
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
		wr := []SendWR{{WRID: uint64(n), Opcode: WRRDMAWrite, Flags: SendInline | SendSignaled,
			SGL: []SGE{{Addr: sliceAddr(payload), Length: 100}}, RemoteAddr: 0x10, RKey: 1}}
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
		var wc [1]WC
		if k, err := r.cq.Poll(wc[:]); k != 1 || err != nil || wc[0].WRID != uint64(n) || wc[0].Opcode != WCRDMAWrite {
			t.Fatalf("poll: %d %v %+v", k, err, wc[0])
		}
	}
	if !wrapped {
		t.Fatal("no WQE wrapped the ring end")
	}
}

func TestPostSendRejectsWithoutSideEffects(t *testing.T) {
	r := newRingQP(t, QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 32}, false)
	q := r.qp
	ok := SendWR{Opcode: WRSend, SGL: []SGE{{Addr: 1, Length: 1, LKey: 1}}}
	snapshot := func() []byte { return append([]byte(nil), q.mem.Bytes()...) }
	before := snapshot()
	maxInl := int(q.cap.MaxInlineData) // 60: the WQE slot rounds the request up
	big := make([]byte, maxInl+1)
	cases := []struct {
		wrs   []SendWR
		err   error
		index int
		limit int
	}{
		{[]SendWR{ok, {Opcode: WRSend, SGL: make([]SGE, 3)}}, ErrTooManySGE, 1, 2},
		{[]SendWR{ok, ok, {Opcode: WRSend, Flags: SendInline, SGL: []SGE{{Addr: sliceAddr(big), Length: uint32(maxInl + 1)}}}}, ErrInlineTooLarge, 2, maxInl},
		{[]SendWR{ok, ok, ok, ok, ok}, ErrSQFull, 4, 4},
		{[]SendWR{{Opcode: 99}}, ErrBadOpcode, 0, 0},
		{[]SendWR{{Opcode: WRAtomicFetchAdd, SGL: []SGE{{Length: 4}}}}, ErrBadAtomic, 0, 0},
	}
	for i, tc := range cases {
		err := q.PostSend(tc.wrs)
		var we *WRError
		if !errors.Is(err, tc.err) || !errors.As(err, &we) || we.Index != tc.index || we.Limit != tc.limit {
			t.Errorf("case %d: %v, want %v at %d limit %d", i, err, tc.err, tc.index, tc.limit)
		}
	}
	q.state.Store(uint32(QPStateRTR))
	if err := q.PostSend([]SendWR{ok}); !errors.Is(err, ErrQPState) {
		t.Errorf("post in RTR: %v", err)
	}
	q.state.Store(uint32(QPStateReset))
	if err := q.PostRecv([]RecvWR{{}}); !errors.Is(err, ErrQPState) {
		t.Errorf("recv in RESET: %v", err)
	}
	q.state.Store(uint32(QPStateRTS))
	if err := q.PostRecv([]RecvWR{{SGL: make([]SGE, 2)}}); !errors.Is(err, ErrTooManySGE) {
		t.Errorf("recv 2 SGEs: %v", err)
	}
	if err := q.PostRecv(make([]RecvWR, 5)); !errors.Is(err, ErrRQFull) {
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
	r := newRingQP(t, QPCap{MaxSendWR: 4, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 3}, false)
	q := r.qp
	wrs := []RecvWR{
		{WRID: 10, SGL: []SGE{{Addr: 0x100, Length: 64, LKey: 5}}},
		{WRID: 11, SGL: []SGE{{Addr: 0x200, Length: 8, LKey: 6}, {Addr: 0x300, Length: 8, LKey: 7}, {Addr: 0x400, Length: 8, LKey: 8}}},
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
	var wc [4]WC
	n, err := r.cq.Poll(wc[:])
	if n != 2 || err != nil {
		t.Fatalf("poll %d %v", n, err)
	}
	want0 := WC{WRID: 10, Opcode: WCRecv, ByteLen: 50, Imm: 0xcafe, QPNum: 0x1234, SrcQP: 0x99, SL: 3, Flags: WCWithImm | WCWithGRH}
	want1 := WC{WRID: 11, Opcode: WCRecvRDMAWithImm, Imm: 0xbeef, QPNum: 0x1234, SrcQP: 0x99, Flags: WCWithImm}
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
	r := newRingQP(t, QPCap{MaxSendWR: 8, MaxSendSGE: 1}, false)
	q := r.qp
	wr := SendWR{Opcode: WRRDMAWrite, SGL: []SGE{{Addr: 1, Length: 1}}}
	for i := 0; i < 3; i++ {
		wr.WRID = uint64(i)
		if err := q.PostSend([]SendWR{wr}); err != nil {
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
	var wc [2]WC
	n, err := r.cq.Poll(wc[:])
	if n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if wc[0] != (WC{WRID: 2, Status: WCRemAccessErr, VendorErr: 0x88, QPNum: 0x1234}) {
		t.Fatalf("%+v", wc[0])
	}
	if wc[0].Status.String() != "remote access error" {
		t.Errorf("status string %q", wc[0].Status)
	}
	if q.sq.tail() != 3 || q.sq.done() != q.sq.cur() {
		t.Fatalf("tail %d done %d cur %d", q.sq.tail(), q.sq.done(), q.sq.cur())
	}
	for syn, want := range map[uint8]WCStatus{
		mlx5.SyndromeLocalLengthErr: WCLocLenErr, mlx5.SyndromeLocalQPOpErr: WCLocQPOpErr,
		mlx5.SyndromeLocalProtErr: WCLocProtErr, mlx5.SyndromeWRFlushErr: WCWRFlushErr,
		mlx5.SyndromeMWBindErr: WCMWBindErr, mlx5.SyndromeBadRespErr: WCBadRespErr,
		mlx5.SyndromeLocalAccessErr: WCLocAccessErr, mlx5.SyndromeRemoteInvalReqErr: WCRemInvReqErr,
		mlx5.SyndromeRemoteAccessErr: WCRemAccessErr, mlx5.SyndromeRemoteOpErr: WCRemOpErr,
		mlx5.SyndromeTransportRetryExc: WCRetryExcErr, mlx5.SyndromeRNRRetryExc: WCRNRRetryExcErr,
		mlx5.SyndromeRemoteAbortedErr: WCRemAbortErr, 0x77: WCGeneralErr,
	} {
		if err := q.PostSend([]SendWR{wr}); err != nil {
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
	r := newRingQP(t, QPCap{MaxSendWR: 4, MaxSendSGE: 1}, false)
	q := r.qp
	wr := []SendWR{{Opcode: WRSend, Flags: SendSignaled}}
	var wc [1]WC
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
		if n, err := r.cq.Poll(wc[:]); n != 1 || err != nil || wc[0].WRID != uint64(i) || wc[0].Opcode != WCSend {
			t.Fatalf("%d: %d %v %+v", i, n, err, wc[0])
		}
	}
}

func TestPollUnknownQPN(t *testing.T) {
	r := newRingQP(t, QPCap{MaxSendWR: 4, MaxSendSGE: 1}, false)
	r.nicCQE(0, mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: 0x999})
	var wc [1]WC
	if _, err := r.cq.Poll(wc[:]); !errors.Is(err, ErrCQOverrun) {
		t.Fatalf("err %v", err)
	}
}

func TestDataPathAllocatesNothing(t *testing.T) {
	r := newRingQP(t, QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}, true)
	q := r.qp
	payload, _ := NewBuffer(64)
	defer payload.Free()
	wrs := make([]SendWR, 8)
	for i := range wrs {
		wrs[i] = SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, SGL: []SGE{{Addr: payload.Addr(), Length: 64, LKey: 1}}, RemoteAddr: 1, RKey: 2}
	}
	inl := []SendWR{{Opcode: WRRDMAWrite, Flags: SendInline, SGL: wrs[0].SGL, RemoteAddr: 1, RKey: 2}}
	rwr := []RecvWR{{SGL: wrs[0].SGL}}
	var wc [4]WC
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
	r := newRingQP(t, QPCap{MaxSendWR: 4, MaxSendSGE: 1}, false)
	if err := r.qp.PostRecv([]RecvWR{{}}); !errors.Is(err, ErrRQFull) {
		t.Fatalf("recv on a QP without RQ: %v", err)
	}
	if len(r.qp.OutstandingRecvs(nil)) != 0 {
		t.Fatal("outstanding receives on a QP without RQ")
	}
	s := newRingQP(t, QPCap{MaxRecvWR: 4, MaxRecvSGE: 1}, false)
	if err := s.qp.PostSend([]SendWR{{Opcode: WRSend}}); !errors.Is(err, ErrSQFull) {
		t.Fatalf("send on a QP without SQ: %v", err)
	}
	if s.qp.SendProducer() != 0 || len(s.qp.OutstandingSends(nil)) != 0 || s.qp.SendWRID(3) != 0 {
		t.Fatal("SQ state on a QP without SQ")
	}
	if err := s.qp.RingSendDoorbell(1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ring without SQ: %v", err)
	}
	if _, err := r.qp.CopySendWQE(s.qp, 0, WQERewrite{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("copy from a QP without SQ: %v", err)
	}
	if _, err := s.qp.ReadSendWQE(0, make([]byte, 64)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("read WQE without SQ: %v", err)
	}
}
