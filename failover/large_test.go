package failover

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
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
	if err := qb.PostRecv([]RecvWR{{WRID: 42}}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend([]SendWR{
		{WRID: 1, Opcode: WRRDMAWrite, SGL: []SGE{ha.mr.SGE(0, size)}, RemoteAddr: hb.mr.Addr + size, RKey: hb.mr.RKey},
		{WRID: 2, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, Imm: 7, RemoteAddr: hb.mr.Addr, RKey: hb.mr.RKey},
	}); err != nil {
		t.Fatal(err)
	}
	// SHIFT learns of the failure from the error completion, so the sender polls (as every
	// RDMA application does) before the receiver can expect its notification.
	s := waitN(t, ha.cq, 1)[0]
	if s.Status != WCSuccess || s.WRID != 2 {
		t.Fatalf("sender completion %+v", s)
	}
	w := waitN(t, hb.cq, 1)[0]
	if w.Status != WCSuccess || w.WRID != 42 || w.Imm != 7 || w.ByteLen != 0 {
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
