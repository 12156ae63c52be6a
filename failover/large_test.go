package failover

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/provider/verbs"
)

// A 1 MiB WRITE whose first packets landed when the default path died (every packet after
// the 300th is dropped) is written again, whole, on the backup; the notification behind it
// arrives with every byte right.
func TestLargeWriteHalfDelivered(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	const size = 1 << 20
	payload(ha.buf.Bytes()[:size], 77, 0)
	var passed atomic.Int64
	e.cl.Endpoint(0, 0, 1).Faults(fabric.TX).SetFilter(func(*roce.Packet) bool {
		return passed.Add(1) > 300
	})
	if err := qb.PostRecv([]verbs.RecvWR{{WRID: 42}}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(0, size)}, RemoteAddr: hb.mr.Addr() + size, RKey: hb.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, Imm: 7, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	// SHIFT learns of the failure from the error completion, so the sender polls (as every
	// RDMA application does) before the receiver can expect its notification.
	s := waitN(t, ha.cq, 1)[0]
	if s.Status != verbs.WCSuccess || s.WRID != 2 {
		t.Fatalf("sender completion %+v", s)
	}
	w := waitN(t, hb.cq, 1)[0]
	if w.Status != verbs.WCSuccess || w.WRID != 42 || w.Imm != 7 || w.ByteLen != 0 {
		t.Fatalf("notification %+v", w)
	}
	if !bytes.Equal(hb.buf.Bytes()[size:2*size], ha.buf.Bytes()[:size]) {
		t.Fatal("the WRITE's data is not complete when its notification arrived")
	}
	if qa.SendState() != SendFallback || passed.Load() <= 300 {
		t.Fatalf("state %v, %d packets seen by the filter", qa.SendState(), passed.Load())
	}
	expectNoMore(t, ha.cq)
	expectNoMore(t, hb.cq)
}

// Inline SENDs from one buffer that the application overwrites right after each post: the
// reposted copies carry the bytes each WR was posted with.
func TestInlineReusedBuffer(t *testing.T) {
	e := newEnv(t, 256)
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	const n, size = 48, 48
	for i := range n {
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{hb.mr.SGE(i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	src := ha.buf.Bytes()[:size]
	for i := range n {
		payload(src, 5, uint64(i))
		if err := qa.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendInline | verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: ha.mr.Addr(), Length: size}}}}); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			e.linkDown(0)
		}
	}
	clear(src)
	for i, w := range waitN(t, ha.cq, n) {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) {
			t.Fatalf("send completion %d: %+v", i, w)
		}
	}
	want := make([]byte, size)
	for i, w := range waitN(t, hb.cq, n) {
		payload(want, 5, uint64(i))
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) || w.ByteLen != size || !bytes.Equal(hb.buf.Bytes()[i*64:i*64+size], want) {
			t.Fatalf("receive %d: %+v, data %v", i, w, bytes.Equal(hb.buf.Bytes()[i*64:i*64+size], want))
		}
	}
	if qa.SendState() != SendFallback {
		t.Fatalf("state %v", qa.SendState())
	}
}
