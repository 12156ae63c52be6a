package provider_test

import (
	"errors"
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestE2EDrainMarker: unsignaled WQEs that completed leave no completion of their own, so
// after the QP is moved to ERR nothing would ever retire them; the drain marker's flush
// completion comes after every earlier WQE's and retires them all.
func TestE2EDrainMarker(t *testing.T) { e2eDrainMarker(t, newTestbed(t)) }

func e2eDrainMarker(t *testing.T, tb *testbed) {
	a, b := connectedPair(t, tb, defaultPairOpts())
	const marker = 0x4d41524b
	if err := a.qp.PostDrainMarker(marker); !errors.Is(err, verbs.ErrQPState) {
		t.Fatalf("marker on a QP in RTS: %v, want ErrQPState", err)
	}
	fill(a.buf.Bytes()[:128], 3)
	if err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{a.mr.SGE(64, 32)}, RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey()},
		{WRID: 3, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{a.mr.SGE(96, 32)}, RemoteAddr: b.mr.Addr() + 96, RKey: b.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].WRID != 1 || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("wc %+v", wc[0])
	}
	if out := a.qp.OutstandingSends(nil); len(out) != 2 || out[0].WRID != 2 || out[1].WRID != 3 {
		t.Fatalf("outstanding before the drain %+v, want the two unsignaled WRITEs", out)
	}
	if err := a.qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostDrainMarker(marker); err != nil {
		t.Fatal(err)
	}
	// The unsignaled WRITEs either completed (no completion) or were flushed (one each),
	// before the marker's flush completion in either case.
	var got []verbs.WC
	for len(got) == 0 || got[len(got)-1].WRID != marker {
		got = append(got, waitWC(t, a.cq, 1)...)
		if len(got) > 3 {
			t.Fatalf("completions %+v", got)
		}
	}
	// The flushed ones are the last of WRITEs 2 and 3, in order.
	flushed := len(got) - 1
	for i, w := range got {
		want := uint64(marker)
		if i < flushed {
			want = uint64(4 - flushed + i)
		}
		if w.Status != verbs.WCWRFlushErr || w.WRID != want {
			t.Fatalf("completion %d of %d: %+v (%v), want wr_id %#x flushed", i, len(got), w, w.Status, want)
		}
	}
	if out := a.qp.OutstandingSends(nil); len(out) != 0 {
		t.Fatalf("outstanding after the marker's completion %+v", out)
	}
}
