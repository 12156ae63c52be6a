package mlx5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func newSQ(t testing.TB, cnt int) *SQ {
	t.Helper()
	q, err := NewSQ(mapped(t, cnt*SendWQEBB), cnt)
	if err != nil {
		t.Fatal(err)
	}
	q.MaxInline = 512
	return q
}

func TestNewSQGeometry(t *testing.T) {
	for _, c := range []struct{ n, cnt int }{{64 * 3, 3}, {64 * 4, 8}, {0, 0}, {64 * 2 << 16, 2 << 16}} {
		if _, err := NewSQ(make([]byte, c.n), c.cnt); !errors.Is(err, ErrGeometry) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("NewSQ(%d bytes, %d) = %v, want ErrGeometry/EINVAL", c.n, c.cnt, err)
		}
	}
}

// TestSQBuildParse builds every RC opcode with random fields at every ring position,
// including WQEs that wrap around the end of the ring, and parses them back.
func TestSQBuildParse(t *testing.T) {
	r := seeded(t)
	q := newSQ(t, 16)
	q.SetCurPost(uint32(r.IntN(1 << 20)))
	ops := []Opcode{OpcodeNOP, OpcodeSend, OpcodeSendImm, OpcodeRDMAWrite, OpcodeRDMAWriteImm, OpcodeRDMARead, OpcodeAtomicCS, OpcodeAtomicFA}
	var w SendWQE
	for round := 0; round < 4000; round++ {
		op := ops[r.IntN(len(ops))]
		raddr, atom, _ := op.Segments()
		ctrl := CtrlSeg{Opcode: op, QPN: r.Uint32() & 0xffffff, FMCESE: uint8(r.UintN(256)) & (CtrlFenceMask | CtrlCEMask | CtrlSolicited), Imm: r.Uint32()}
		ra := RaddrSeg{RemoteAddr: r.Uint64(), RKey: r.Uint32()}
		as := AtomicSeg{SwapAdd: r.Uint64(), Compare: r.Uint64()}
		b := q.Begin()
		if raddr {
			b.Raddr(ra)
		}
		if atom {
			b.Atomic(as)
		}
		inline := op != OpcodeNOP && !atom && op != OpcodeRDMARead && r.IntN(2) == 0
		var payload []byte
		var sges []DataSeg
		if inline {
			payload = make([]byte, 1+r.IntN(300))
			for i := range payload {
				payload[i] = byte(r.Uint32())
			}
			// Split the payload to exercise multi-chunk inline copies.
			cut := r.IntN(len(payload) + 1)
			if err := b.Inline(payload[:cut]); err != nil {
				t.Fatal(err)
			}
			if err := b.Inline(payload[cut:]); err != nil {
				t.Fatal(err)
			}
		} else if op != OpcodeNOP {
			n := 1 + r.IntN(6)
			if atom {
				n = 1
			}
			for i := 0; i < n; i++ {
				d := DataSeg{ByteCount: 1 + r.Uint32N(1<<20), LKey: r.Uint32(), Addr: r.Uint64()}
				sges = append(sges, d)
				b.Data(d)
			}
			b.Data(DataSeg{LKey: 7, Addr: 9}) // zero length: skipped like rdma-core
		}
		before := q.CurPost()
		p, err := b.Finish(ctrl)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if p.WQEIndex != uint16(before) || q.CurPost() != before+uint32(p.BBs) || int(p.BBs) != WQEBBs(int(p.DS)) {
			t.Fatalf("round %d: posted %+v, cur_post %d -> %d", round, p, before, q.CurPost())
		}
		if err := q.Parse(before, &w); err != nil {
			t.Fatalf("round %d (%v): parse: %v", round, op, err)
		}
		ctrl.WQEIndex, ctrl.DS = p.WQEIndex, p.DS
		if w.Ctrl != ctrl || w.HasRaddr != raddr || w.HasAtomic != atom || w.BBs != int(p.BBs) {
			t.Fatalf("round %d: parsed %+v, want ctrl %+v raddr %v atomic %v", round, w.Ctrl, ctrl, raddr, atom)
		}
		if raddr && w.Raddr != ra || atom && w.Atomic != as {
			t.Fatalf("round %d: segments %+v %+v, want %+v %+v", round, w.Raddr, w.Atomic, ra, as)
		}
		if w.Inline != inline {
			t.Fatalf("round %d: inline %v want %v", round, w.Inline, inline)
		}
		if inline {
			got := make([]byte, w.InlineLen)
			if n := q.CopyInline(&w, got); n != len(payload) || !bytes.Equal(got, payload) {
				t.Fatalf("round %d: inline payload %d bytes differ (want %d)", round, n, len(payload))
			}
			if int(p.DS) != 1+InlineDS(len(payload))+boolInt(raddr) {
				t.Fatalf("round %d: DS %d for %d inline bytes", round, p.DS, len(payload))
			}
		} else {
			if w.NumData != len(sges) {
				t.Fatalf("round %d: %d data segments, want %d", round, w.NumData, len(sges))
			}
			for i := range sges {
				if w.Data[i] != sges[i] {
					t.Fatalf("round %d: data %d = %+v want %+v", round, i, w.Data[i], sges[i])
				}
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSQWrapLayout pins the wrap-around rule byte for byte: a WQE that starts in the last
// basic block continues at offset 0.
func TestSQWrapLayout(t *testing.T) {
	q := newSQ(t, 4)
	q.SetCurPost(3) // last basic block
	b := q.Begin()
	b.Raddr(RaddrSeg{RemoteAddr: 0x1111, RKey: 0x22})
	for i := 0; i < 3; i++ {
		b.Data(DataSeg{ByteCount: uint32(i + 1), LKey: 0x33, Addr: uint64(0x4400 + i)})
	}
	p, err := b.Finish(CtrlSeg{Opcode: OpcodeRDMAWrite, QPN: 5})
	if err != nil {
		t.Fatal(err)
	}
	if p.Offset != 192 || p.DS != 5 || p.BBs != 2 || q.CurPost() != 5 {
		t.Fatalf("posted %+v cur_post %d", p, q.CurPost())
	}
	// ctrl 192, raddr 208, data 224, data 240, data wraps to 0.
	if got := binary.BigEndian.Uint64(q.Buf()[208:]); got != 0x1111 {
		t.Fatalf("raddr at 208 = %#x", got)
	}
	if got := binary.BigEndian.Uint32(q.Buf()[0:]); got != 3 {
		t.Fatalf("third data segment byte_count at offset 0 = %d", got)
	}
}

func TestSQInlineWrapAndLimits(t *testing.T) {
	q := newSQ(t, 4)
	q.MaxInline = 100
	q.SetCurPost(3)
	b := q.Begin()
	b.Raddr(RaddrSeg{RemoteAddr: 1, RKey: 2})
	payload := bytes.Repeat([]byte{0xab}, 60) // header at 224, data 228..255 then 0..31
	if err := b.Inline(payload); err != nil {
		t.Fatal(err)
	}
	p, err := b.Finish(CtrlSeg{Opcode: OpcodeRDMAWrite})
	if err != nil {
		t.Fatal(err)
	}
	if p.DS != 2+4 { // ctrl + raddr + (4+60 -> 64 bytes = 4 units)
		t.Fatalf("DS %d", p.DS)
	}
	if !IsInline(q.Buf()[224:]) || InlineLen(q.Buf()[224:]) != 60 || q.Buf()[0] != 0xab || q.Buf()[31] != 0xab {
		t.Fatalf("inline layout wrong: % x", q.Buf()[224:232])
	}
	b = q.Begin()
	if err := b.Inline(make([]byte, 101)); !errors.Is(err, ErrInlineTooLarge) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("oversized inline: %v", err)
	}
	// A WQE beyond DS 63 is refused.
	q2 := newSQ(t, 64)
	b = q2.Begin()
	for i := 0; i < 70; i++ {
		b.Data(DataSeg{ByteCount: 1})
	}
	if _, err := b.Finish(CtrlSeg{Opcode: OpcodeSend}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized WQE: %v", err)
	}
}

func TestSQParseRejects(t *testing.T) {
	q := newSQ(t, 4)
	put := func(c CtrlSeg) { c.Put(q.Buf()[0:]) }
	var w SendWQE
	put(CtrlSeg{Opcode: OpcodeSend, DS: 0})
	if err := q.Parse(0, &w); !errors.Is(err, ErrMalformed) {
		t.Errorf("DS 0: %v", err)
	}
	put(CtrlSeg{Opcode: 0x77, DS: 1})
	if err := q.Parse(0, &w); !errors.Is(err, ErrMalformed) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("bad opcode: %v", err)
	}
	put(CtrlSeg{Opcode: OpcodeRDMAWrite, DS: 1})
	if err := q.Parse(0, &w); !errors.Is(err, ErrMalformed) {
		t.Errorf("write without raddr: %v", err)
	}
	put(CtrlSeg{Opcode: OpcodeSend, DS: 17}) // 5 basic blocks in a 4-block ring
	if err := q.Parse(0, &w); !errors.Is(err, ErrMalformed) {
		t.Errorf("DS beyond ring: %v", err)
	}
	put(CtrlSeg{Opcode: OpcodeSend, DS: 2})
	PutInlineHeader(q.Buf()[16:], 40) // needs 3 units, DS leaves 1
	if err := q.Parse(0, &w); !errors.Is(err, ErrMalformed) {
		t.Errorf("inline longer than DS: %v", err)
	}
}

// TestDoorbellSequence rings one small inline WQE (BlueFlame) and one large WQE (8-byte
// doorbell) and checks the doorbell record, the UAR bytes and the alternating halves.
func TestDoorbellSequence(t *testing.T) {
	q := newSQ(t, 8)
	dbm := mapped(t, 8)
	db, err := NewDBRec(dbm)
	if err != nil {
		t.Fatal(err)
	}
	uar, err := NewUARPage(mapped(t, AdapterPageSize))
	if err != nil {
		t.Fatal(err)
	}
	l := UARLayout{PageSize: 4096, UARsPerPage: 1, BfRegSize: 512, TotBfregs: 2}
	loc, _ := l.Locate(1)
	bf, err := NewBFReg(uar, loc)
	if err != nil {
		t.Fatal(err)
	}
	// 1: inline SEND of 20 bytes: ctrl + 2 units = DS 3, BlueFlame copies 64 bytes.
	b := q.Begin()
	if err := b.Inline([]byte("twenty bytes of data")); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Finish(CtrlSeg{Opcode: OpcodeSend, QPN: 0x42, FMCESE: CtrlCQUpdate})
	bf.Ring(q, db, 1, p, true)
	if dbm[4] != 0 || dbm[5] != 0 || dbm[6] != 0 || dbm[7] != 1 {
		t.Fatalf("doorbell record send counter bytes % x, want 00 00 00 01", dbm[4:8])
	}
	if db.SendCounter() != 1 {
		t.Fatalf("send counter %d", db.SendCounter())
	}
	mem := uar.mem
	if !bytes.Equal(mem[0xa00:0xa40], q.Buf()[0:64]) {
		t.Fatalf("BlueFlame copy at 0xa00 differs from the WQE")
	}
	if bf.CurrentOffset() != 0xb00 {
		t.Fatalf("next doorbell at %#x, want 0xb00", bf.CurrentOffset())
	}
	// 2: a non-inline WRITE with 8 SGEs (DS 10) would fit a 256-byte half, but only
	// PreferBF copies non-inline WQEs: an 8-byte doorbell is expected.
	b = q.Begin()
	b.Raddr(RaddrSeg{RemoteAddr: 0x1000, RKey: 9})
	for i := 0; i < 8; i++ {
		b.Data(DataSeg{ByteCount: 8, LKey: 1, Addr: uint64(i)})
	}
	p2, _ := b.Finish(CtrlSeg{Opcode: OpcodeRDMAWrite, QPN: 0x42})
	bf.Ring(q, db, 1, p2, false)
	v := uar.Load64(0xb00)
	if !bytes.Equal(v[:], q.Buf()[p2.Offset:p2.Offset+8]) {
		t.Fatalf("doorbell % x, want the first 8 bytes of the WQE % x", v, q.Buf()[p2.Offset:p2.Offset+8])
	}
	d := ParseSQDoorbell(v)
	if d.WQEIndex != 1 || d.QPN != 0x42 || d.DS != 10 || d.Opcode != OpcodeRDMAWrite {
		t.Fatalf("parsed doorbell %+v", d)
	}
	if !bytes.Equal(mem[0xb08:0xb40], make([]byte, 0x38)) {
		t.Fatalf("8-byte doorbell wrote more than 8 bytes")
	}
	if bf.CurrentOffset() != 0xa00 || db.SendCounter() != 4 {
		t.Fatalf("offset %#x counter %d", bf.CurrentOffset(), db.SendCounter())
	}
	// bfreg 0 never uses BlueFlame and never alternates.
	loc0, _ := l.Locate(0)
	bf0, _ := NewBFReg(uar, loc0)
	b = q.Begin()
	_ = b.Inline([]byte("x"))
	p3, _ := b.Finish(CtrlSeg{Opcode: OpcodeSend})
	bf0.Ring(q, db, 1, p3, true)
	if v := uar.Load64(0x800); !bytes.Equal(v[:], q.Buf()[p3.Offset:p3.Offset+8]) || bf0.CurrentOffset() != 0x800 {
		t.Fatalf("bfreg 0 doorbell % x offset %#x", v, bf0.CurrentOffset())
	}
}

// TestBlueFlameWrap checks that a BlueFlame copy of a WQE spanning the end of the ring
// copies the wrapped part from the start of the ring (mlx5_bf_copy).
func TestBlueFlameWrap(t *testing.T) {
	q := newSQ(t, 4)
	q.SetCurPost(3)
	db, err := NewDBRec(mapped(t, 8))
	if err != nil {
		t.Fatal(err)
	}
	uar, _ := NewUARPage(mapped(t, AdapterPageSize))
	bf, _ := NewBFReg(uar, Bfreg{Index: 1, Offset: 0xa00, BufSize: 256})
	b := q.Begin()
	_ = b.Inline(bytes.Repeat([]byte{0xcd}, 80)) // ctrl + 6 units = 112 bytes -> 128 copied
	p, _ := b.Finish(CtrlSeg{Opcode: OpcodeSend})
	bf.Ring(q, db, 1, p, true)
	want := append(append([]byte{}, q.Buf()[192:256]...), q.Buf()[0:64]...)
	if !bytes.Equal(uar.mem[0xa00:0xa80], want) {
		t.Fatal("wrapped BlueFlame copy differs from ring contents")
	}
}

// TestRingAtWithheld builds two WQEs, publishes only the first with RingAt (a withheld
// doorbell), then the second.
func TestRingAtWithheld(t *testing.T) {
	q := newSQ(t, 8)
	db, _ := NewDBRec(mapped(t, 8))
	uar, _ := NewUARPage(mapped(t, AdapterPageSize))
	bf, _ := NewBFReg(uar, Bfreg{Index: 1, Offset: 0xa00, BufSize: 256})
	var ps []Posted
	for i := 0; i < 2; i++ {
		b := q.Begin()
		b.Raddr(RaddrSeg{RemoteAddr: 1, RKey: 2})
		b.Data(DataSeg{ByteCount: 8, LKey: 3, Addr: 4})
		b.Data(DataSeg{ByteCount: 8, LKey: 3, Addr: 5})
		b.Data(DataSeg{ByteCount: 8, LKey: 3, Addr: 6})
		p, _ := b.Finish(CtrlSeg{Opcode: OpcodeRDMAWrite, QPN: 1})
		ps = append(ps, p)
	}
	if q.CurPost() != 4 || db.SendCounter() != 0 {
		t.Fatalf("cur_post %d, counter %d before ringing", q.CurPost(), db.SendCounter())
	}
	bf.RingAt(q, db, 2, 1, ps[0], false)
	if db.SendCounter() != 2 || ParseSQDoorbell(uar.Load64(0xa00)).WQEIndex != 0 {
		t.Fatalf("after first ring: counter %d doorbell %+v", db.SendCounter(), ParseSQDoorbell(uar.Load64(0xa00)))
	}
	bf.RingAt(q, db, 4, 1, ps[1], false)
	if db.SendCounter() != 4 || ParseSQDoorbell(uar.Load64(0xb00)).WQEIndex != 2 {
		t.Fatalf("after second ring: counter %d doorbell %+v", db.SendCounter(), ParseSQDoorbell(uar.Load64(0xb00)))
	}
}

// TestReadWriteWQE moves a wrapped WQE from one ring to another position of another ring and
// checks that it parses to the same WQE with the new QPN and index.
func TestReadWriteWQE(t *testing.T) {
	src, dst := newSQ(t, 4), newSQ(t, 8)
	src.SetCurPost(3)
	b := src.Begin()
	b.Raddr(RaddrSeg{RemoteAddr: 0xabc, RKey: 0x11})
	for i := 0; i < 4; i++ {
		b.Data(DataSeg{ByteCount: uint32(100 + i), LKey: 0x22, Addr: uint64(i)})
	}
	p, err := b.Finish(CtrlSeg{Opcode: OpcodeRDMAWriteImm, QPN: 0x100, Imm: 5, FMCESE: CtrlCQUpdate})
	if err != nil {
		t.Fatal(err)
	}
	var raw [MaxDS * SegSize]byte
	n, err := src.ReadWQE(3, raw[:])
	if err != nil || n != int(p.DS)*SegSize {
		t.Fatalf("ReadWQE: %d, %v", n, err)
	}
	dst.SetCurPost(7)
	q, err := dst.WriteWQE(raw[:n], 0x200)
	if err != nil || q.WQEIndex != 7 || q.DS != p.DS || dst.CurPost() != 7+uint32(p.BBs) {
		t.Fatalf("WriteWQE: %+v, %v", q, err)
	}
	var a, c SendWQE
	if err := src.Parse(3, &a); err != nil {
		t.Fatal(err)
	}
	if err := dst.Parse(7, &c); err != nil {
		t.Fatal(err)
	}
	if c.Ctrl.QPN != 0x200 || c.Ctrl.WQEIndex != 7 {
		t.Fatalf("rewritten ctrl %+v", c.Ctrl)
	}
	c.Ctrl.QPN, c.Ctrl.WQEIndex, c.Offset = a.Ctrl.QPN, a.Ctrl.WQEIndex, a.Offset
	if a != c {
		t.Fatalf("copied WQE differs:\n%+v\n%+v", a, c)
	}
	if _, err := src.ReadWQE(3, raw[:16]); !errors.Is(err, ErrShort) {
		t.Fatalf("short dst: %v", err)
	}
	if _, err := dst.WriteWQE(raw[:n-16], 1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("DS mismatch accepted: %v", err)
	}
}
