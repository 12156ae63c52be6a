package nic

import (
	"bytes"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
)

// TestHoldRecvCQEs: while a QP's receive CQEs are held, its messages are placed and
// acknowledged (the sender's CQEs come) but the receiver's CQ stays empty; on release the
// CQEs come in order, and later ones behind them.
func TestHoldRecvCQEs(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	for i := range 3 {
		b.postRecv(i*1024, 1024)
	}
	b.h.dev.HoldRecvCQEs(b.qp.QPN())
	for i := range 2 {
		fill(a.mem[i*1024:i*1024+100], byte(i+1))
		a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(i*1024, 100+i)}, signaled: true})
	}
	for range 2 {
		checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess) // acknowledged
	}
	if placed := bytes.Equal(b.mem[1024:1125], a.mem[1024:1125]); !placed || !b.rcq.empty() {
		t.Fatalf("held: data placed %v, receive CQ empty %v", placed, b.rcq.empty())
	}
	b.h.dev.ReleaseRecvCQEs()
	a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(2048, 102)}, signaled: true})
	for i := range 3 {
		if wc := checkCQE(t, b.rcq.poll(), mlx5.CQERespSend, mlx5.WCSuccess); int(wc.WQECounter) != i || wc.ByteLen != uint32(100+i) {
			t.Fatalf("receive %d: %+v", i, wc)
		}
	}
}
