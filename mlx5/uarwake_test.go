package mlx5

import "testing"

// A registered page's doorbells wake its parked device model once per park, through each
// doorbell function; an unparked model, an unregistered page or a page wrapped before the
// registration are not poked.
func TestUARWaker(t *testing.T) {
	page := mapped(t, AdapterPageSize)
	wake := make(chan struct{}, 1)
	w := NewUARWaker(wake)
	before, _ := NewUARPage(page) // wrapped before the registration: no waker
	unregister := RegisterUARWaker(page, w)
	uar, err := NewUARPage(page)
	if err != nil {
		t.Fatal(err)
	}
	h := newHotPath(t)
	bf, err := NewBFReg(uar, Bfreg{Index: 1, Offset: 0xa00, BufSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	post := func() Posted {
		b := h.sq.Begin()
		p, err := b.Finish(CtrlSeg{Opcode: OpcodeNOP, QPN: 0x99, FMCESE: CtrlCQUpdate})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	woken := func() bool {
		select {
		case <-wake:
			return true
		default:
			return false
		}
	}
	rings := []struct {
		name string
		ring func()
	}{
		{"Ring", func() { bf.Ring(h.sq, h.db, 1, post(), false) }},
		{"RingFast", func() { p := post(); bf.RingFast(h.sq, h.db, h.sq.CurPost(), 1, p, false) }},
		{"ArmCQ", func() { ArmCQ(h.cqdb, uar, 7, 0, 0, false) }},
	}
	for _, r := range rings {
		y := w.Yielded()
		r.ring()
		if woken() {
			t.Fatalf("%s: an unparked model was woken", r.name)
		}
		if w.Yielded() != y {
			t.Fatalf("%s: a ring on an unparked model counted a yield (%v, %v before)", r.name, w.Yielded(), y)
		}
		w.Park()
		y0 := w.Yielded()
		r.ring()
		if !woken() {
			t.Fatalf("%s: the parked model was not woken", r.name)
		}
		if w.Yielded() <= y0 {
			t.Fatalf("%s: the poke's yield was not counted (%v, %v before)", r.name, w.Yielded(), y0)
		}
		r.ring() // the first poke ended the park
		if woken() {
			t.Fatalf("%s: woken twice for one park", r.name)
		}
		if poked, claimed := w.Unpark(); !poked || claimed {
			t.Fatalf("%s: Unpark after a poke reported poked %v, claimed %v", r.name, poked, claimed)
		}
	}
	w.Park()
	if poked, claimed := w.Unpark(); poked || claimed {
		t.Fatalf("Unpark of a park nobody ended reported poked %v, claimed %v", poked, claimed)
	}
	w.Park()
	if !w.Claim() || w.Claim() {
		t.Fatal("Claim did not end the park exactly once")
	}
	ArmCQ(h.cqdb, uar, 7, 0, 0, false) // a poke after the claim: the park is over
	if woken() {
		t.Fatal("a poke after a Claim woke the model")
	}
	if poked, claimed := w.Unpark(); poked || !claimed {
		t.Fatalf("Unpark after a Claim reported poked %v, claimed %v", poked, claimed)
	}
	if w.Claim() {
		t.Fatal("Claim ended a park after Unpark")
	}
	w.Park()
	ArmCQ(h.cqdb, uar.WithoutWake(), 7, 0, 0, false)
	if woken() {
		t.Fatal("a page without its wake woke the model")
	}
	ArmCQ(h.cqdb, before, 7, 0, 0, false)
	if woken() {
		t.Fatal("a page wrapped before the registration woke the model")
	}
	unregister()
	after, _ := NewUARPage(page)
	ArmCQ(h.cqdb, after, 7, 0, 0, false)
	if woken() {
		t.Fatal("a page wrapped after the unregistration woke the model")
	}
	// An unregistration of a waker that no longer owns the address leaves the new one.
	w2 := NewUARWaker(wake)
	unregister2 := RegisterUARWaker(page, w2)
	defer unregister2()
	unregister()
	if lookupUARWaker(page) != w2 {
		t.Fatal("a stale unregistration removed the page's new waker")
	}
}
