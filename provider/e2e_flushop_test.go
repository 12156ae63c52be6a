package provider_test

import (
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestE2EFlushedReceivesSayRecv: one CQ serves a QP's send and receive queues, both full,
// with the same wr_ids (0..15) in each; the link goes down past the retry reach, so the
// QP goes to ERR and both queues flush. The error completions must say which queue they
// belong to: a flushed receive has WCRecv in its opcode, a failed or flushed send has not.
// Before the fix a receive's error completion had opcode 0 (IBV_WC_SEND), so a consumer
// that sorts completions by opcode (the deterministic simulator, the failover layer) saw
// the receive flush of wr_id 0 as a 17th completion of a 16-deep send queue (sim seed 80).
func TestE2EFlushedReceivesSayRecv(t *testing.T) {
	tb := newTestbed(t)
	tb.needEmulator(t, "link down injection")
	const depth = 16
	o := defaultPairOpts()
	o.cap.MaxSendWR, o.cap.MaxRecvWR = depth, depth
	o.attr.Timeout = 8 // 1 ms per try
	o.attr.RetryCnt = 2
	a, _ := connectedPair(t, tb, o)
	for i := range depth {
		if err := a.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{a.mr.SGE(i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	tb.cluster.Endpoint(1, 0, 1).SetLinkUp(false)
	for i := range depth {
		if err := a.qp.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	var sends, recvs []verbs.WC
	for _, wc := range waitWC(t, a.cq, 2*depth) {
		if wc.QPNum != a.qp.QPN() {
			t.Fatalf("completion for QP %#x: %+v", wc.QPNum, wc)
		}
		if wc.Opcode&verbs.WCRecv != 0 {
			recvs = append(recvs, wc)
		} else {
			sends = append(sends, wc)
		}
	}
	if len(sends) != depth || len(recvs) != depth {
		t.Fatalf("%d send and %d receive completions, want %d of each:\nsends %+v\nrecvs %+v", len(sends), len(recvs), depth, sends, recvs)
	}
	for i, wc := range sends {
		want := verbs.WCWRFlushErr
		if i == 0 {
			want = verbs.WCRetryExcErr
		}
		if wc.WRID != uint64(i) || wc.Status != want {
			t.Errorf("send completion %d: wr_id %d status %v, want wr_id %d %v", i, wc.WRID, wc.Status, i, want)
		}
	}
	for i, wc := range recvs {
		if wc.WRID != uint64(i) || wc.Status != verbs.WCWRFlushErr {
			t.Errorf("receive completion %d: wr_id %d status %v, want wr_id %d WR_FLUSH_ERR", i, wc.WRID, wc.Status, i)
		}
	}
	var extra [4]verbs.WC
	if n, err := a.cq.Poll(extra[:]); n != 0 || err != nil {
		t.Fatalf("%d completions more (%v): %+v", n, err, extra[:n])
	}
}
