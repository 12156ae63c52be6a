package provider

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

func TestOutstandingWithheldRingAndCopy(t *testing.T) {
	a := newRingQP(t, verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 32}, false)
	b := newRingQP(t, verbs.QPCap{MaxSendWR: 16, MaxSendSGE: 2, MaxInlineData: 32}, false)
	b.qp.qpn = 0x4321
	b.qp.sq.qpn = 0x4321
	sge := []verbs.SGE{{Addr: 0x1000, Length: 10, LKey: 0x100}, {Addr: 0x2000, Length: 20, LKey: 0x200}}
	if err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, SGL: sge, RemoteAddr: 0x50, RKey: 0x60},
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: sge[:1]},
	}); err != nil {
		t.Fatal(err)
	}
	rung := a.qp.SendRung()
	// Withheld: written, but neither the doorbell record nor the UAR changes.
	dbBefore := binary.BigEndian.Uint32(a.qp.dbrec[4:])
	uarBefore := append([]byte(nil), a.uar.Bytes()[0x800:0xa00]...)
	end3, err := a.qp.PostSendNoDoorbell([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMAWriteWithImm, SGL: sge, RemoteAddr: 0x70, RKey: 0x60, Imm: 9}})
	if err != nil {
		t.Fatal(err)
	}
	end4, err := a.qp.PostSendNoDoorbell([]verbs.SendWR{{WRID: 4, Opcode: verbs.WRAtomicFetchAdd, SGL: []verbs.SGE{{Addr: 0x3000, Length: 8, LKey: 0x300}}, RemoteAddr: 0x80, RKey: 0x61, CompareAdd: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(a.qp.dbrec[4:]) != dbBefore || string(a.uar.Bytes()[0x800:0xa00]) != string(uarBefore) {
		t.Fatal("PostSendNoDoorbell touched the doorbell")
	}
	out := a.qp.OutstandingSends(nil)
	if len(out) != 4 {
		t.Fatalf("outstanding %+v", out)
	}
	for i, w := range out {
		if w.WRID != uint64(i+1) || w.Rung != (i < 2) {
			t.Errorf("outstanding[%d] = %+v", i, w)
		}
	}
	if out[3].Opcode != mlx5.OpcodeAtomicFA || !out[1].Signaled || out[0].Signaled {
		t.Errorf("outstanding details %+v", out)
	}
	// Ring up to the first withheld WQE only.
	if err := a.qp.RingSendDoorbell(end3); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(a.qp.dbrec[4:]); got != end3&0xffff {
		t.Fatalf("dbrec %d want %d", got, end3)
	}
	db := mlx5.ParseSQDoorbell([8]byte(a.lastDoorbell()[:8]))
	if db.WQEIndex != uint16(out[2].Pos) || db.Opcode != mlx5.OpcodeRDMAWriteImm || db.QPN != 0x1234 {
		t.Fatalf("doorbell %+v", db)
	}
	if err := a.qp.RingSendDoorbell(end3 - 1); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("ring backwards: %v", err)
	}
	if a.qp.SendRung() == rung || a.qp.SendProducer() != end4 {
		t.Fatal("positions")
	}
	// A completion for WR 2 retires 1 and 2.
	a.nicCQE(0, mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: uint32(mlx5.OpcodeSend)<<24 | 0x1234, WQECounter: uint16(out[1].Pos)})
	var wc [2]verbs.WC
	if n, _ := a.cq.Poll(wc[:]); n != 1 || wc[0].WRID != 2 {
		t.Fatalf("poll %+v", wc[0])
	}
	out = a.qp.OutstandingSends(out[:0])
	if len(out) != 2 || out[0].WRID != 3 || out[1].WRID != 4 {
		t.Fatalf("after retire %+v", out)
	}
	// Copy both into b with key rewrites.
	rw := WQERewrite{LKey: func(k uint32) uint32 { return k + 1 }, RKey: func(k uint32) uint32 { return k | 0x1000 }}
	for _, w := range out {
		if _, err := b.qp.CopySendWQE(a.qp, w.Pos, rw); err != nil {
			t.Fatal(err)
		}
	}
	got := b.qp.OutstandingSends(nil)
	if len(got) != 2 || got[0].WRID != 3 || got[1].WRID != 4 || got[0].Rung {
		t.Fatalf("copied %+v", got)
	}
	c, wqe := b.sqWQE(t, got[0].Pos)
	if c.QPN != 0x4321 || c.WQEIndex != uint16(got[0].Pos) || c.Opcode != mlx5.OpcodeRDMAWriteImm || c.Imm != 9 {
		t.Fatalf("ctrl %+v", c)
	}
	r, _ := mlx5.DecodeRaddrSeg(wqe[16:])
	d0, _ := mlx5.DecodeDataSeg(wqe[32:])
	d1, _ := mlx5.DecodeDataSeg(wqe[48:])
	if r.RKey != 0x1060 || r.RemoteAddr != 0x70 || d0.LKey != 0x101 || d1.LKey != 0x201 || d1.Addr != 0x2000 {
		t.Fatalf("rewrite: %+v %+v %+v", r, d0, d1)
	}
	c, wqe = b.sqWQE(t, got[1].Pos)
	as, _ := mlx5.DecodeAtomicSeg(wqe[32:])
	d, _ := mlx5.DecodeDataSeg(wqe[48:])
	if c.Opcode != mlx5.OpcodeAtomicFA || as.SwapAdd != 1 || d.LKey != 0x301 {
		t.Fatalf("atomic copy %+v %+v %+v", c, as, d)
	}
	if err := b.qp.RingSendDoorbell(b.qp.SendProducer()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.qp.CopySendWQE(a.qp, 0, rw); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("copy of a retired WQE: %v", err)
	}
	// Receives: outstanding list and scatter lists read back.
	if err := a.qp.PostRecv([]verbs.RecvWR{{WRID: 7, SGL: sge}, {WRID: 8, SGL: sge[1:]}}); err != nil {
		t.Fatal(err)
	}
	rs := a.qp.OutstandingRecvs(nil)
	if len(rs) != 2 || rs[0].WRID != 7 || rs[1].WRID != 8 {
		t.Fatalf("recvs %+v", rs)
	}
	if sg := a.qp.RecvSGL(rs[0].Index, nil); len(sg) != 2 || sg[1] != sge[1] {
		t.Fatalf("sgl %+v", sg)
	}
	if sg := a.qp.RecvSGL(rs[1].Index, nil); len(sg) != 1 || sg[0] != sge[1] {
		t.Fatalf("sgl %+v", sg)
	}
}

func TestCQCleanAndResetIndices(t *testing.T) {
	r := newRingQP(t, verbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}, false)
	other := &QP{qpn: 0x77, sq: &sendQueue{}, rq: &recvQueue{}}
	otherRing, _ := mlx5.NewSQ(make([]byte, 256), 4)
	other.sq = newSendQueue(otherRing, nil, mlx5.DBRec{}, 64, 4, 1, 0, 0x77, false)
	other.sq.wrid[1] = 99
	other.sq.nbb[1] = 1
	other.sq.pos[1] = 1
	r.cq.attach(other)
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled}}
	for i := 0; i < 3; i++ {
		wr[0].WRID = uint64(i)
		mustPost(t, r.qp.PostSend(wr))
	}
	// CQEs: ours(0), other(1), ours(1), other(1), ours(2)
	seq := []struct {
		qpn uint32
		ctr uint16
	}{{0x1234, 0}, {0x77, 1}, {0x1234, 1}, {0x77, 1}, {0x1234, 2}}
	for i, s := range seq {
		r.nicCQE(uint32(i), mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: uint32(mlx5.OpcodeSend)<<24 | s.qpn, WQECounter: s.ctr})
	}
	r.cq.ring.clean(0x1234)
	var wc [8]verbs.WC
	n, err := r.cq.Poll(wc[:])
	if err != nil || n != 2 || wc[0].QPNum != 0x77 || wc[1].QPNum != 0x77 || wc[0].WRID != 99 {
		t.Fatalf("after clean: %d %v %+v", n, err, wc[:n])
	}
	r.qp.resetIndices()
	if r.qp.sq.cur() != 0 || r.qp.sq.head != 0 || binary.BigEndian.Uint64(r.qp.dbrec) != 0 || len(r.qp.OutstandingSends(nil)) != 0 {
		t.Fatal("indices not reset")
	}
}
