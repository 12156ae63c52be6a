package nic

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5"
)

// expectQPError waits for the device's QP error callback.
func expectQPError(t *testing.T, q *qpEnd, want mlx5.WCStatus) {
	t.Helper()
	select {
	case s := <-q.errs:
		if s != want {
			t.Fatalf("QP error callback with %v, want %v", s, want)
		}
	case <-time.After(waitFor):
		t.Fatal("no QP error callback")
	}
}

// A bad lkey fails the WQE with a local protection error CQE (even unsignaled), the QP goes to
// ERR, and the WQEs after it are flushed.
func TestLocalErrors(t *testing.T) {
	cases := []struct {
		name     string
		make     func(a, b *qpEnd) wqe
		syndrome uint8
		status   mlx5.WCStatus
	}{
		{"bad lkey", func(a, b *qpEnd) wqe {
			s := a.seg(0, 64)
			s.LKey ^= 0x5500
			return wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{s}, raddr: b.va(0), rkey: b.mr.RKey}
		}, mlx5.SyndromeLocalProtErr, mlx5.WCLocProtErr},
		{"beyond the MR", func(a, b *qpEnd) wqe {
			return wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(memSize-100, 200)}}
		}, mlx5.SyndromeLocalProtErr, mlx5.WCLocProtErr},
		{"other PD", func(a, b *qpEnd) wqe {
			mr, err := a.h.dev.RegisterMR(a.h.pd+1, addrOf(a.mem), 4096, AccessLocalWrite)
			if err != nil {
				a.t.Fatal(err)
			}
			return wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{{ByteCount: 64, LKey: mr.LKey, Addr: addrOf(a.mem)}}}
		}, mlx5.SyndromeLocalProtErr, mlx5.WCLocProtErr},
		{"READ into read-only memory", func(a, b *qpEnd) wqe {
			mr, err := a.h.dev.RegisterMR(a.h.pd, addrOf(a.mem), 4096, 0)
			if err != nil {
				a.t.Fatal(err)
			}
			return wqe{op: mlx5.OpcodeRDMARead, local: []mlx5.DataSeg{{ByteCount: 64, LKey: mr.LKey, Addr: addrOf(a.mem)}}, raddr: b.va(0), rkey: b.mr.RKey}
		}, mlx5.SyndromeLocalProtErr, mlx5.WCLocProtErr},
		{"bad opcode", func(a, b *qpEnd) wqe {
			return wqe{op: mlx5.Opcode(0x1f), local: []mlx5.DataSeg{a.seg(0, 8)}}
		}, mlx5.SyndromeLocalQPOpErr, mlx5.WCLocQPOpErr},
		{"atomic with a 4-byte result buffer", func(a, b *qpEnd) wqe {
			return wqe{op: mlx5.OpcodeAtomicFA, local: []mlx5.DataSeg{a.seg(0, 4)}, raddr: b.va(0), rkey: b.mr.RKey, atomic: mlx5.FetchAdd(1)}
		}, mlx5.SyndromeLocalQPOpErr, mlx5.WCLocQPOpErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			a, b := e.pairQPs()
			// A good signaled WRITE first: it completes normally, before the error.
			good := a.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 64)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
			bad := a.build(tc.make(a, b)) // unsignaled: an error still produces a CQE
			after := a.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 64)}, raddr: b.va(0), rkey: b.mr.RKey})
			a.bf.Ring(a.sq, a.db, 3, after, false)

			wc := checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
			if wc.WQECounter != good.WQEIndex {
				t.Fatalf("first CQE for wqe %d, want %d", wc.WQECounter, good.WQEIndex)
			}
			ce := a.scq.poll()
			wc = checkCQE(t, ce, mlx5.CQEReqErr, tc.status)
			if ce.Syndrome != tc.syndrome || wc.WQECounter != bad.WQEIndex || wc.QPN != a.qp.QPN() {
				t.Fatalf("error CQE syndrome %#x wqe %d qpn %#x, want %#x wqe %d qpn %#x",
					ce.Syndrome, wc.WQECounter, wc.QPN, tc.syndrome, bad.WQEIndex, a.qp.QPN())
			}
			wc = checkCQE(t, a.scq.poll(), mlx5.CQEReqErr, mlx5.WCWRFlushErr)
			if wc.WQECounter != after.WQEIndex {
				t.Fatalf("flush CQE for wqe %d, want %d", wc.WQECounter, after.WQEIndex)
			}
			if a.qp.State() != QPSErr {
				t.Fatalf("QP state %v after a local error, want ERR", a.qp.State())
			}
			expectQPError(t, a, tc.status)

			// WQEs rung in ERR are flushed too, and posted receives are flushed.
			p := a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 8)}, signaled: true})
			wc = checkCQE(t, a.scq.poll(), mlx5.CQEReqErr, mlx5.WCWRFlushErr)
			if wc.WQECounter != p.WQEIndex {
				t.Fatalf("flush of a WQE rung in ERR: wqe %d, want %d", wc.WQECounter, p.WQEIndex)
			}
			a.postRecv(0, 64)
			checkCQE(t, a.rcq.poll(), mlx5.CQERespErr, mlx5.WCWRFlushErr)
		})
	}
}

// A receive WQE with a bad lkey: the incoming SEND cannot land; the receive completes with a
// local protection error and the responder QP goes to ERR.
func TestBadReceiveLKey(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	s := b.seg(0, 64)
	s.LKey ^= 0x1100
	if _, err := b.rq.Post([]mlx5.DataSeg{s}); err != nil {
		t.Fatal(err)
	}
	b.rq.Ring(b.db)
	a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 8)}, signaled: true})
	ce := b.rcq.poll()
	checkCQE(t, ce, mlx5.CQERespErr, mlx5.WCLocProtErr)
	expectQPError(t, b, mlx5.WCLocProtErr)
	if b.qp.State() != QPSErr {
		t.Fatalf("responder state %v, want ERR", b.qp.State())
	}
}

// RESET clears the device's ring indexes, as software restarts at 0 after a reset.
func TestResetRestartsRings(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	b.postRecv(0, 64)
	for _, q := range []*qpEnd{a, b} {
		if err := q.qp.Modify(QPSReset, QPAttr{}); err != nil {
			t.Fatal(err)
		}
		q.sq.SetCurPost(0)
		q.rq.SetHead(0)
		q.db.SetSendCounter(0)
		q.db.SetRecvCounter(0)
	}
	attrA, attrB := attrsFor(a, b), attrsFor(b, a)
	attrA.SQPSN, attrB.RQPSN = 5000, 5000
	attrB.SQPSN, attrA.RQPSN = 6000, 6000
	for _, st := range []QPState{QPSInit, QPSRTR, QPSRTS} {
		if err := a.qp.Modify(st, attrA); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.Modify(st, attrB); err != nil {
			t.Fatal(err)
		}
	}
	b.postRecv(128, 64)
	fill(a.mem[:40], 8)
	p := a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 40)}, signaled: true})
	if p.WQEIndex != 0 {
		t.Fatalf("first WQE after reset has index %d", p.WQEIndex)
	}
	wc := checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if wc.WQECounter != 0 {
		t.Fatalf("CQE wqe_counter %d after reset, want 0", wc.WQECounter)
	}
	r := checkCQE(t, b.rcq.poll(), mlx5.CQERespSend, mlx5.WCSuccess)
	if r.WQECounter != 0 || r.ByteLen != 40 {
		t.Fatalf("receive after reset %+v", r)
	}
}
