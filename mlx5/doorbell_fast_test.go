package mlx5

import (
	"bytes"
	"testing"
)

// TestRingFastMatchesRingAt rings random doorbells — one or several WQEs, inline or not, WQEs
// of every size at every ring position (BlueFlame copies that wrap), bfreg 0 and a BlueFlame
// register, with and without PreferBF/ShutUpBF/NeedLock — through RingAt on one set of
// rings and RingFast on an identical one, and requires identical doorbell records, UAR pages
// and register halves afterwards.
func TestRingFastMatchesRingAt(t *testing.T) {
	r := fastSeeded(t)
	const cnt = 16
	type set struct {
		q   *SQ
		db  DBRec
		uar UARPage
		bf  [2]*BFReg
	}
	mk := func() set {
		var s set
		var err error
		if s.q, err = NewSQ(fastMapped(t, cnt*SendWQEBB), cnt); err != nil {
			t.Fatal(err)
		}
		if s.db, err = NewDBRec(fastMapped(t, 8)); err != nil {
			t.Fatal(err)
		}
		if s.uar, err = NewUARPage(fastMapped(t, AdapterPageSize)); err != nil {
			t.Fatal(err)
		}
		if s.bf[0], err = NewBFReg(s.uar, Bfreg{Index: 0, Offset: 0x800}); err != nil {
			t.Fatal(err)
		}
		if s.bf[1], err = NewBFReg(s.uar, Bfreg{Index: 2, Offset: 0x900, BufSize: 256}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := mk(), mk()
	bfUsed := 0
	for round := 0; round < 20000; round++ {
		for i := range a.q.buf {
			a.q.buf[i] = byte(r.Uint32())
		}
		copy(b.q.buf, a.q.buf)
		ds := 1 + r.IntN(MaxDS)
		if r.IntN(2) == 0 {
			ds = 1 + r.IntN(16) // mostly WQEs that fit a BlueFlame half
		}
		idx := r.Uint32()
		last := Posted{Offset: a.q.Offset(idx), WQEIndex: uint16(idx), DS: uint8(ds), BBs: uint8(WQEBBs(ds))}
		nreq := r.IntN(4)
		inline := r.IntN(2) == 0
		counter := r.Uint32()
		k := r.IntN(2)
		prefer, shut, lock := r.IntN(4) == 0, r.IntN(8) == 0, r.IntN(4) == 0
		for _, s := range []set{a, b} {
			s.bf[k].PreferBF, s.bf[k].ShutUpBF, s.bf[k].NeedLock = prefer, shut, lock
		}
		a.bf[k].RingAt(a.q, a.db, counter, nreq, last, inline)
		b.bf[k].RingFast(b.q, b.db, counter, nreq, last, inline)
		if a.db.Load(SndDBR) != b.db.Load(SndDBR) || a.db.Load(RcvDBR) != b.db.Load(RcvDBR) {
			t.Fatalf("round %d: doorbell record %#x/%#x, fast %#x/%#x", round, a.db.Load(SndDBR), a.db.Load(RcvDBR), b.db.Load(SndDBR), b.db.Load(RcvDBR))
		}
		if a.bf[k].CurrentOffset() != b.bf[k].CurrentOffset() {
			t.Fatalf("round %d: register half %#x, fast %#x", round, a.bf[k].CurrentOffset(), b.bf[k].CurrentOffset())
		}
		if !bytes.Equal(a.uar.mem, b.uar.mem) {
			for i := range a.uar.mem {
				if a.uar.mem[i] != b.uar.mem[i] {
					t.Fatalf("round %d (bfreg %d, nreq %d, ds %d, inline %v): UAR pages differ first at %#x", round, k, nreq, ds, inline, i)
				}
			}
		}
		if k == 1 && nreq == 1 && inline && !shut && ds > 1 && ds <= 16 {
			bfUsed++
		}
	}
	if bfUsed < 100 {
		t.Fatalf("only %d BlueFlame copies compared", bfUsed)
	}
}
