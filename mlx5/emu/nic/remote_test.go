package nic

import (
	"bytes"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

type rcStats = rc.Stats

func expectEvent(t *testing.T, q *qpEnd, want QPEvent) {
	t.Helper()
	select {
	case ev := <-q.events:
		if ev != want {
			t.Fatalf("async event %d, want %d", ev, want)
		}
	case <-time.After(waitFor):
		t.Fatalf("no async event %d", want)
	}
}

func noEvent(t *testing.T, q *qpEnd) {
	t.Helper()
	select {
	case ev := <-q.events:
		t.Fatalf("unexpected async event %d on qp %#x", ev, q.qp.QPN())
	default:
	}
}

// A WRITE to an rkey the responder does not know: REM_ACCESS_ERR at the requester (a CQE, no
// async event), the responder QP in ERR with an access-violation event.
func TestRemoteAccessError(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	p := a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 64)}, raddr: b.va(0), rkey: b.mr.RKey ^ 0x300})
	ce := a.scq.poll()
	wc := checkCQE(t, ce, mlx5.CQEReqErr, mlx5.WCRemAccessErr)
	if ce.Syndrome != mlx5.SyndromeRemoteAccessErr || wc.WQECounter != p.WQEIndex {
		t.Fatalf("syndrome %#x wqe %d", ce.Syndrome, wc.WQECounter)
	}
	expectQPError(t, a, mlx5.WCRemAccessErr)
	expectEvent(t, b, QPEventAccessErr)
	waitUntil(t, "responder in ERR", func() bool { return b.qp.State() == QPSErr })
	noEvent(t, a)

	// A region without remote write: the same error.
	e2 := newEnv(t)
	a, b = e2.pairQPs()
	ro, err := e2.b.dev.RegisterMR(e2.b.pd, addrOf(b.mem), 4096, AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 64)}, raddr: b.va(0), rkey: ro.RKey, signaled: true})
	checkCQE(t, a.scq.poll(), mlx5.CQEReqErr, mlx5.WCRemAccessErr)
	// The READ the region does allow works on a fresh pair.
	e3 := newEnv(t)
	a, b = e3.pairQPs()
	ro, err = e3.b.dev.RegisterMR(e3.b.pd, addrOf(b.mem), 4096, AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	a.post(wqe{op: mlx5.OpcodeRDMARead, local: []mlx5.DataSeg{a.seg(0, 64)}, raddr: b.va(0), rkey: ro.RKey, signaled: true})
	checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
}

// A SEND longer than the posted receive: LOC_LEN_ERR on the receive, REM_INV_REQ_ERR at the
// requester, and an invalid-request event on the responder.
func TestReceiveTooSmall(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	b.postRecv(0, 100)
	a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 200)}, signaled: true})
	checkCQE(t, b.rcq.poll(), mlx5.CQERespErr, mlx5.WCLocLenErr)
	checkCQE(t, a.scq.poll(), mlx5.CQEReqErr, mlx5.WCRemInvReqErr)
	expectEvent(t, b, QPEventReqErr)
	noEvent(t, a)
}

// A SEND that arrives before any receive is posted is RNR-NAKed; once software posts a
// receive (doorbell record only), the retried SEND lands in it.
func TestRNRThenReceive(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	fill(a.mem[:300], 21)
	a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 300)}, signaled: true})
	waitUntil(t, "an RNR NAK", func() bool {
		return b.qp.Transport().(interface{ Stats() rcStats }).Stats().RNRNAKsSent > 0
	})
	if !a.scq.empty() || !b.rcq.empty() {
		t.Fatal("completion before a receive was posted")
	}
	b.postRecv(1024, 512)
	checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	r := checkCQE(t, b.rcq.poll(), mlx5.CQERespSend, mlx5.WCSuccess)
	if r.ByteLen != 300 || !bytes.Equal(b.mem[1024:1324], a.mem[:300]) {
		t.Fatalf("receive %+v or data wrong after RNR", r)
	}
}
