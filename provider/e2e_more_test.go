package provider_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// A WQE written without its doorbell is not executed; ringing up to it runs exactly it.
// Withheld WQEs copied into another connected QP run there with their original wr_ids (the
// failover path SHIFT takes).
func TestE2EWithheldDoorbellAndCopy(t *testing.T) { e2eWithheldDoorbellAndCopy(t, newTestbed(t)) }

func e2eWithheldDoorbellAndCopy(t *testing.T, tb *testbed) {
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	a, b := connectedPair(t, tb, o)
	ab, bb := a.buf.Bytes(), b.buf.Bytes()
	fill(ab[:3*4096], 9)
	w := func(id uint64, i int) verbs.SendWR {
		return verbs.SendWR{WRID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(i*4096, 4096)}, RemoteAddr: b.mr.Addr() + uint64(i*4096), RKey: b.mr.RKey()}
	}
	end1, err := a.qp.PostSendNoDoorbell([]verbs.SendWR{w(100, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSendNoDoorbell([]verbs.SendWR{w(101, 1), w(102, 2)}); err != nil {
		t.Fatal(err)
	}
	// Give the NIC every chance to (wrongly) run them.
	time.Sleep(20 * time.Millisecond)
	var wc [4]verbs.WC
	if n, _ := a.cq.Poll(wc[:]); n != 0 || !bytes.Equal(bb[:4096], make([]byte, 4096)) {
		t.Fatalf("withheld WQE executed: %d completions", n)
	}
	if err := a.qp.RingSendDoorbell(end1); err != nil {
		t.Fatal(err)
	}
	if got := waitWC(t, a.cq, 1); got[0].WRID != 100 {
		t.Fatalf("wc %+v", got[0])
	}
	time.Sleep(20 * time.Millisecond)
	if n, _ := a.cq.Poll(wc[:]); n != 0 || !bytes.Equal(bb[4096:8192], make([]byte, 4096)) {
		t.Fatalf("WQE beyond the rung index executed")
	}
	out := a.qp.OutstandingSends(nil)
	if len(out) != 2 || out[0].WRID != 101 || out[1].WRID != 102 || out[0].Rung {
		t.Fatalf("outstanding %+v", out)
	}
	// A second connected pair on the same devices plays the backup path. As SHIFT does, the
	// same application memory is registered with the backup PDs, so only keys change.
	a2 := openSide(t, tb.names[0], o, 0x3000)
	b2 := openSide(t, tb.names[1], o, 0x4000)
	if err := verbs.Connect(a2.qp, o.attr, a2.ep, b2.ep); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(b2.qp, o.attr, b2.ep, a2.ep); err != nil {
		t.Fatal(err)
	}
	access := (verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead)
	amr2, err := as[*provider.MR](a2.pd.RegMR(ab, access))
	if err != nil {
		t.Fatal(err)
	}
	defer amr2.Dereg()
	bmr2, err := as[*provider.MR](b2.pd.RegMR(bb, access))
	if err != nil {
		t.Fatal(err)
	}
	defer bmr2.Dereg()
	keys := provider.WQERewrite{
		LKey: func(k uint32) uint32 {
			if k != a.mr.LKey() {
				t.Errorf("unexpected lkey %#x", k)
			}
			return amr2.LKey()
		},
		RKey: func(k uint32) uint32 {
			if k != b.mr.RKey() {
				t.Errorf("unexpected rkey %#x", k)
			}
			return bmr2.RKey()
		},
	}
	for _, wqe := range out {
		if _, err := a2.qp.CopySendWQE(a.qp, wqe.Pos, keys); err != nil {
			t.Fatal(err)
		}
	}
	if err := a2.qp.RingSendDoorbell(a2.qp.SendProducer()); err != nil {
		t.Fatal(err)
	}
	got := waitWC(t, a2.cq, 2)
	if got[0].WRID != 101 || got[1].WRID != 102 || got[0].Status != verbs.WCSuccess || got[1].Status != verbs.WCSuccess {
		t.Fatalf("copied completions %+v", got)
	}
	if !bytes.Equal(bb[:3*4096], ab[:3*4096]) {
		t.Fatal("data of the copied WQEs did not land")
	}
}

// A QP reset to RESET is reusable: both sides reset and reconnect, then traffic flows.
func TestE2EResetAndReconnect(t *testing.T) { e2eResetAndReconnect(t, newTestbed(t)) }

func e2eResetAndReconnect(t *testing.T, tb *testbed) {
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	a, b := connectedPair(t, tb, o)
	// Break the connection with a bad rkey, leaving a in ERR.
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() + 1}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].Status != verbs.WCRemAccessErr {
		t.Fatalf("%v", wc[0].Status)
	}
	for _, s := range []*side{a, b} {
		if err := s.qp.Reset(); err != nil {
			t.Fatal(err)
		}
		if st := s.qp.State(); st != verbs.QPStateReset {
			t.Fatalf("state %v", st)
		}
	}
	a.ep.PSN, b.ep.PSN = 0x777, 0x888
	if err := verbs.Connect(a.qp, o.attr, a.ep, b.ep); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(b.qp, o.attr, b.ep, a.ep); err != nil {
		t.Fatal(err)
	}
	fill(a.buf.Bytes()[:512], 5)
	if err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 7, SGL: []verbs.SGE{b.mr.SGE(0, 512)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 512)}}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].WRID != 2 || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("after reconnect: %+v", wc[0])
	}
	if wc := waitWC(t, b.cq, 1); wc[0].WRID != 7 || !bytes.Equal(b.buf.Bytes()[:512], a.buf.Bytes()[:512]) {
		t.Fatalf("after reconnect: %+v", wc[0])
	}
}

func TestE2ELocalProtectionAndRNR(t *testing.T) { e2eLocalProtectionAndRNR(t, newTestbed(t)) }

func e2eLocalProtectionAndRNR(t *testing.T, tb *testbed) {
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	o.attr.RNRRetry = 1 // retry once, then RNR_RETRY_EXC_ERR
	o.attr.MinRNRTimer = 1
	a, b := connectedPair(t, tb, o)
	// No receive posted at b: the SEND is NAKed RNR until the retries run out.
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 16)}}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].Status != verbs.WCRNRRetryExcErr {
		t.Fatalf("SEND without receive: %v, want RNR_RETRY_EXC_ERR", wc[0].Status)
	}
	_ = b
	// A fresh pair: a WRITE whose local SGE names a foreign lkey fails locally.
	c, d := connectedPair(t, tb, defaultPairOpts())
	if err := c.qp.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: c.mr.Addr(), Length: 16, LKey: c.mr.LKey() ^ 0x700}}, RemoteAddr: d.mr.Addr(), RKey: d.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, c.cq, 1); wc[0].Status != verbs.WCLocProtErr {
		t.Fatalf("bad lkey: %v, want LOC_PROT_ERR", wc[0].Status)
	}
}

// Armed for solicited completions only, the CQ raises no event for an ordinary SEND and one
// for a solicited SEND.
func TestE2ESolicitedEvent(t *testing.T) { e2eSolicitedEvent(t, newTestbed(t)) }

func e2eSolicitedEvent(t *testing.T, tb *testbed) {
	a, b := connectedPair(t, tb, defaultPairOpts())
	if err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 64)}}, {WRID: 2, SGL: []verbs.SGE{b.mr.SGE(64, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.cq.Arm(true); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, b.cq, 1); wc[0].WRID != 1 {
		t.Fatalf("%+v", wc[0])
	}
	short, cancel := context.WithTimeout(bg, 30*time.Millisecond)
	_, err := b.ch.GetEvent(short)
	cancel()
	if !errors.Is(err, verbs.ErrTimeout) {
		t.Fatalf("event for an unsolicited SEND: %v", err)
	}
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSolicited, SGL: []verbs.SGE{a.mr.SGE(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	guard, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	if cq, err := b.ch.GetEvent(guard); err != nil || cq != b.cq {
		t.Fatalf("solicited event: %v", err)
	}
	b.cq.AckEvents(1)
}
