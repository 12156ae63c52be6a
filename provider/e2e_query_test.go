package provider_test

import (
	"errors"
	"net"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

func TestE2EDevicesQueriesAndGIDs(t *testing.T) { e2eDevicesQueriesAndGIDs(t, newTestbed(t)) }

func e2eDevicesQueriesAndGIDs(t *testing.T, tb *testbed) {
	devs, err := provider.Devices()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, d := range devs {
		if d.Name == tb.names[0] || d.Name == tb.names[1] {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("Devices() lacks the test devices: %+v", devs)
	}
	ctx, err := provider.Open(tb.names[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	da, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.PhysPortCnt < 1 || da.MaxQPWR == 0 || da.MaxCQE == 0 || da.MaxSGE == 0 {
		t.Fatalf("device attributes %+v", da)
	}
	pa, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.State != uverbs.PortActive || pa.ActiveMTU < uverbs.MTU1024 || pa.LinkLayer != 2 {
		t.Fatalf("port attributes %+v", pa)
	}
	g0, err := ctx.GIDByIndex(1, int(tb.gid))
	if err != nil || (tb.cluster != nil && !g0.RoCEv2) {
		t.Fatalf("GID %d: %+v %v", tb.gid, g0, err)
	}
	if tb.cluster != nil {
		ip := net.IP(emu.PortAddr(0, 0, 1).AsSlice())
		g, err := ctx.GIDByIP(1, ip)
		if err != nil || g.Index != 0 || !g.IP().Equal(ip) {
			t.Fatalf("GID for %v: %+v %v", ip, g, err)
		}
	}
	if _, err := ctx.GIDByIP(1, net.ParseIP("192.0.2.77")); err == nil {
		t.Fatal("GID for a foreign address found")
	}
	if _, err := ctx.GIDByIndex(1, 99); err == nil {
		t.Fatal("GID index 99 found")
	}
	if _, err := provider.Open("no-such-device-x"); err == nil {
		t.Fatal("opened a device that does not exist")
	}
}

// An MR registered without remote write rejects RDMA WRITEs: the requester sees
// REM_ACCESS_ERR, and its QP, which the NIC moved to ERR, is seen so by Query (queryRefresh).
func TestE2EMRAccessFlags(t *testing.T) { e2eMRAccessFlags(t, newTestbed(t)) }

func e2eMRAccessFlags(t *testing.T, tb *testbed) {
	a, b := connectedPair(t, tb, defaultPairOpts())
	ro, err := as[*provider.MR](b.pd.RegMR(b.buf.Bytes()[:4096], verbs.AccessRemoteRead))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Dereg()
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: ro.Addr(), RKey: ro.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].Status != verbs.WCSuccess {
		t.Fatalf("READ from a read-only MR: %v", wc[0].Status)
	}
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: ro.Addr(), RKey: ro.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].Status != verbs.WCRemAccessErr {
		t.Fatalf("WRITE to a read-only MR: %v, want REM_ACCESS_ERR", wc[0].Status)
	}
	queryRefresh(t, a.qp)
}

// queryRefresh checks a QP the NIC moved to ERR (after an error completion): the state the
// data path checks stays as Modify left it until Query refreshes it; QueryOnly reports the
// NIC's state and leaves it (the layer above that owns the QP's state uses it:
// failover.QP.Query).
func queryRefresh(t *testing.T, qp *provider.QP) {
	t.Helper()
	if st := qp.State(); st != verbs.QPStateRTS {
		t.Fatalf("state before any query %v, want RTS (as last set by Modify)", st)
	}
	q, err := qp.QueryOnly(verbs.QPAttrState)
	if err != nil || q.State != verbs.QPStateErr {
		t.Fatalf("QueryOnly: %v, %v; want ERR", q.State, err)
	}
	if st := qp.State(); st != verbs.QPStateRTS {
		t.Fatalf("state after QueryOnly %v, want RTS still", st)
	}
	q, err = qp.Query(verbs.QPAttrState)
	if err != nil || q.State != verbs.QPStateErr {
		t.Fatalf("Query: %v, %v; want ERR", q.State, err)
	}
	if st := qp.State(); st != verbs.QPStateErr {
		t.Fatalf("state after Query %v, want ERR", st)
	}
}

// A CQ that is not polled overruns; the overrun is reported as IBV_EVENT_CQ_ERR.
func TestE2ECQOverrunEvent(t *testing.T) { e2eCQOverrunEvent(t, newTestbed(t)) }

func e2eCQOverrunEvent(t *testing.T, tb *testbed) {
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	a, b := connectedPair(t, tb, o)
	small, err := as[*provider.CQ](a.ctx.CreateCQ(verbs.CQInitAttr{CQE: 1})) // 2 CQEs
	if err != nil {
		t.Fatal(err)
	}
	qp, err := as[*provider.QP](a.pd.CreateQP(verbs.QPInitAttr{SendCQ: small, RecvCQ: small, Cap: verbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		qp.Destroy()
		small.Destroy()
	}()
	bq, err := as[*provider.QP](b.pd.CreateQP(verbs.QPInitAttr{SendCQ: b.cq, RecvCQ: b.cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	defer bq.Destroy()
	le := verbs.Endpoint{QPN: qp.QPN(), PSN: 1, GID: a.ep.GID}
	re := verbs.Endpoint{QPN: bq.QPN(), PSN: 2, GID: b.ep.GID}
	if err := verbs.Connect(qp, o.attr, le, re); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(bq, o.attr, re, le); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := qp.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}); err != nil {
			t.Fatal(err)
		}
	}
	if ev := waitAsync(t, a.ctx, uverbs.EventCQErr); ev.CQ != small {
		t.Fatalf("CQ_ERR for %p, want the small CQ %p", ev.CQ, small)
	}
}

// Objects used after Destroy answer ErrClosed instead of touching freed rings.
func TestE2EUseAfterDestroy(t *testing.T) {
	tb := newTestbed(t)
	s := openSide(t, tb.names[0], defaultPairOpts(), 1)
	cq, err := as[*provider.CQ](s.ctx.CreateCQ(verbs.CQInitAttr{CQE: 4}))
	if err != nil {
		t.Fatal(err)
	}
	qp, err := as[*provider.QP](s.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend}}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("post on a destroyed QP: %v", err)
	}
	if err := qp.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("recv on a destroyed QP: %v", err)
	}
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	var wc [1]verbs.WC
	if _, err := cq.Poll(wc[:]); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("poll of a destroyed CQ: %v", err)
	}
}

// Closing a context with live objects frees their rings (no mapped buffer survives, checked by
// TestMain) and leaves them answering ErrClosed.
func TestE2ECloseWithLiveObjects(t *testing.T) {
	tb := newTestbed(t)
	ctx, err := provider.Open(tb.names[0])
	if err != nil {
		t.Fatal(err)
	}
	pd, err := as[*provider.PD](ctx.AllocPD())
	if err != nil {
		t.Fatal(err)
	}
	cq, err := as[*provider.CQ](ctx.CreateCQ(verbs.CQInitAttr{CQE: 8}))
	if err != nil {
		t.Fatal(err)
	}
	qp, err := as[*provider.QP](pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	before := provider.LiveBuffers()
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if after := provider.LiveBuffers(); after != before-4 {
		t.Fatalf("%d buffers mapped after close, want %d (QP and CQ rings and records freed)", after, before-4)
	}
	if err := qp.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("post after close: %v", err)
	}
	var wc [1]verbs.WC
	if _, err := cq.Poll(wc[:]); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("poll after close: %v", err)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatalf("destroy after close: %v", err)
	}
}
