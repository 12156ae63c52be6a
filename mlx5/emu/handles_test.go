package emu

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestHandleTable(t *testing.T) {
	h := newHandleTable()
	pd := h.add(objPD, "pd")
	cq := h.add(objCQ, "cq")
	if pd != 0 || cq != 1 {
		t.Fatalf("handles %d,%d; want 0,1 (xa_alloc from 0)", pd, cq)
	}
	if _, err := h.get(objPD, cq); !errors.Is(err, unix.EINVAL) {
		t.Errorf("wrong type: %v, want EINVAL", err)
	}
	if _, err := h.get(objPD, 77); !errors.Is(err, unix.ENOENT) {
		t.Errorf("missing: %v, want ENOENT", err)
	}
	busy := errors.New("busy")
	if _, err := h.remove(objPD, pd, func(any) error { return busy }); err != busy {
		t.Errorf("check not honoured: %v", err)
	}
	if o, err := h.remove(objPD, pd, nil); err != nil || o != "pd" {
		t.Fatalf("remove: %v %v", o, err)
	}
	if _, err := h.remove(objPD, pd, nil); !errors.Is(err, unix.ENOENT) {
		t.Errorf("double remove: %v", err)
	}
	if id := h.add(objMR, "mr"); id != 0 {
		t.Errorf("freed id not reused lowest-first: %d", id)
	}
	if id := h.add(objMR, "mr2"); id != 2 {
		t.Errorf("next id %d, want 2", id)
	}
	if n := len(h.all(objMR)); n != 2 {
		t.Errorf("all(MR)=%d", n)
	}
}
