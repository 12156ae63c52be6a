package failover

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// hungPair is one QP pair whose host A's default NIC hung: what it posts stays outstanding
// in the ring, nothing executing and nothing timing out (the completion watchdog waits 10 s).
func hungPair(t *testing.T) (*QP, *testHost, *testHost) {
	t.Helper()
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	e.cl.Hosts[0].Devices[0].NIC().Hang()
	return a[0], e.hosts[0], e.hosts[1]
}

// hungPost posts on q, hungPair's QP, one WR with wr_id id: a 64-byte RDMA WRITE to hb's MR
// (write), or a signaled 64-byte SEND.
func hungPost(t *testing.T, q *QP, ha, hb *testHost, id uint64, write bool) {
	t.Helper()
	wr := verbs.SendWR{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}
	if write {
		wr = verbs.SendWR{WRID: id, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}
	}
	if err := q.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

// The kept decodes, looked up in any order, give each position's own WQE: the same as a
// fresh read and decode of the ring, kept in ring order, gather lists not overlapping.
func TestKeptDecodesByPosition(t *testing.T) {
	q, ha, hb := hungPair(t)
	for i := range 12 {
		sgl := []verbs.SGE{ha.mr.SGE(64*i, 64+i)}
		if i%3 == 1 {
			sgl = append(sgl, ha.mr.SGE(8192+i, 7)) // two entries
		}
		wr := verbs.SendWR{WRID: uint64(i), Opcode: verbs.WRRDMAWrite, SGL: sgl, RemoteAddr: hb.mr.Addr() + uint64(i), RKey: hb.mr.RKey()}
		if err := q.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.defOutstandingLocked()
	ws := q.outSends
	if len(ws) < 12 {
		t.Fatalf("%d WQEs outstanding, want 12", len(ws))
	}
	// Middle first, then backwards, then forwards: inserts before, after and between.
	order := []int{6, 5, 11, 0, 3, 8, 1, 2, 4, 7, 9, 10}
	got := map[uint32]decodedWQE{}
	for _, i := range order {
		d, err := q.decodedLocked(ws[i].Pos)
		if err != nil {
			t.Fatal(err)
		}
		got[ws[i].Pos] = d
	}
	for i, w := range ws[:12] {
		var buf [mlx5.MaxDS * mlx5.SegSize]byte
		n, err := q.def.ReadSendWQE(w.Pos, buf[:])
		if err != nil {
			t.Fatal(err)
		}
		want, err := provider.DecodeSendWQE(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.WR, got[w.Pos].wr); diff != "" {
			t.Fatalf("WQE %d at %d (-ring +kept):\n%s", i, w.Pos, diff)
		}
		c, ok := q.cachedDecodeLocked(w.Pos)
		if !ok || cmp.Diff(want.WR, c.wr) != "" {
			t.Fatalf("WQE %d at %d: kept %v %+v", i, w.Pos, ok, c.wr)
		}
		if i > 0 && int32(q.wqeDec.ents[i].pos-q.wqeDec.ents[i-1].pos) <= 0 {
			t.Fatalf("kept decodes out of ring order at %d: %d after %d", i, q.wqeDec.ents[i].pos, q.wqeDec.ents[i-1].pos)
		}
	}
	// A caller appending to one WQE's list writes no other's (they share one array).
	before := map[uint32][]verbs.SGE{}
	for p, d := range got {
		before[p] = append([]verbs.SGE(nil), d.wr.SGL...)
	}
	for _, d := range got {
		_ = append(d.wr.SGL, verbs.SGE{LKey: 0xdead})
	}
	for p := range got {
		if d, _ := q.cachedDecodeLocked(p); cmp.Diff(before[p], d.wr.SGL) != "" {
			t.Fatalf("an append to a kept gather list overwrote the one at %d: %+v", p, d.wr.SGL)
		}
	}
	if _, ok := q.cachedDecodeLocked(ws[0].Pos + 1000); ok {
		t.Fatal("a position never decoded was found")
	}
}
