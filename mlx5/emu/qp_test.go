package emu_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/uverbs"
)

func TestCQLifecycle(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	x := emutest.Open(t, c.Hosts[0].Devices[0])
	ch, err := uverbs.CreateCompChannel(x.File)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ch)
	cq := x.CreateCQ(64, ch)

	// The same CQ through the legacy and extended write paths.
	buf := emutest.Mem(t, 128*64)
	dbm := emutest.Mem(t, 8)
	ud := mlx5.CreateCQ{BufAddr: uverbs.Addr(buf), DBAddr: uverbs.Addr(dbm), CQESize: 64}
	in := make([]byte, mlx5.CreateCQSize)
	ud.Put(in)
	out := make([]byte, mlx5.CreateCQRespSize)
	w, err := uverbs.CreateCQWrite(x.File, uverbs.CreateCQRequest{CQE: 100, CompChannel: -1}, in, out)
	if err != nil {
		t.Fatal(err)
	}
	if w.CQE != 127 {
		t.Errorf("cqe %d for 100 requested, want 127 (roundup_pow_of_two(101)-1)", w.CQE)
	}
	if _, err := uverbs.DestroyCQWrite(x.File, w.Handle); err != nil {
		t.Fatal(err)
	}
	ex, err := uverbs.CreateCQEx(x.File, uverbs.CreateCQRequest{CQE: 127, CompChannel: ch}, in, out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uverbs.DestroyCQ(x.File, uverbs.DriverIDMLX5, ex.Handle); err != nil {
		t.Fatal(err)
	}

	_, err = uverbs.CreateCQWrite(x.File, uverbs.CreateCQRequest{CQE: 63, CompChannel: x.AsyncFD}, in, out)
	wantErrno(t, "async fd as completion channel", err, unix.EBADF)
	_, err = uverbs.CreateCQWrite(x.File, uverbs.CreateCQRequest{CQE: 1 << 23, CompChannel: -1}, in, out)
	wantErrno(t, "cqe beyond max_cqe", err, unix.EINVAL)
	_, err = uverbs.CreateCQWrite(x.File, uverbs.CreateCQRequest{CQE: 63, CompChannel: -1, CompVector: 99}, in, out)
	wantErrno(t, "comp vector out of range", err, unix.EINVAL)
	bad := ud
	bad.CQESize = 32
	bad.Put(in)
	_, err = uverbs.CreateCQWrite(x.File, uverbs.CreateCQRequest{CQE: 63, CompChannel: -1}, in, out)
	wantErrno(t, "cqe size 32", err, unix.EINVAL)
	_, err = uverbs.CreateCQWrite(x.File, uverbs.CreateCQRequest{CQE: 63, CompChannel: -1}, in[:8], out)
	wantErrno(t, "short driver data", err, unix.EINVAL)

	// A CQ used by a QP cannot be destroyed.
	qp := x.CreateQP(cq, cq, emutest.DefaultSize)
	_, err = uverbs.DestroyCQ(x.File, uverbs.DriverIDMLX5, cq.Handle)
	wantErrno(t, "destroy cq used by a qp", err, unix.EBUSY)
	wantErrno(t, "dealloc pd used by a qp", uverbs.DeallocPD(x.File, uverbs.DriverIDMLX5, x.PD), unix.EBUSY)
	if _, err := uverbs.DestroyQP(x.File, uverbs.DriverIDMLX5, qp.Handle); err != nil {
		t.Fatal(err)
	}
	_, err = uverbs.DestroyQP(x.File, uverbs.DriverIDMLX5, qp.Handle)
	wantErrno(t, "destroy qp twice", err, unix.ENOENT)
	r, err := uverbs.DestroyCQ(x.File, uverbs.DriverIDMLX5, cq.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if r.Comp_events_reported != 0 || r.Async_events_reported != 0 {
		t.Errorf("events reported %+v", r)
	}
	_, err = uverbs.DestroyCQWrite(x.File, cq.Handle)
	wantErrno(t, "destroy cq twice", err, unix.ENOENT)
}

// rtrMask and rtsMask are the RC requirements of IBA table 91.
const (
	initMask = uverbs.QPAttrState | uverbs.QPAttrPkeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags
	rtrMask  = uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN |
		uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
	rtsMask = uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
		uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic
)

func TestQPLifecycleAndRules(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 2})
	x := emutest.Open(t, c.Hosts[0].Devices[0])
	cq := x.CreateCQ(64, -1)
	qp := x.CreateQP(cq, cq, emutest.DefaultSize)
	peer := c.Hosts[1].Devices[0].Ports()[0].GID()

	bad := func(what string, a uverbs.QPAttr, mask uint32, want unix.Errno) {
		t.Helper()
		wantErrno(t, what, qp.Modify(&a, mask), want)
	}
	bad("RESET→RTR", uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, AV: uverbs.Path{DGID: peer, IsGlobal: true, Port: 1}}, rtrMask, unix.EINVAL)
	bad("RESET→INIT without port", uverbs.QPAttr{State: uverbs.QPStateInit}, initMask&^uverbs.QPAttrPort, unix.EINVAL)
	bad("RESET→INIT with timeout", uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1}, initMask|uverbs.QPAttrTimeout, unix.EINVAL)
	bad("RESET→INIT port 2", uverbs.QPAttr{State: uverbs.QPStateInit, Port: 2}, initMask, unix.EINVAL)
	bad("RESET→INIT pkey index 1", uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1, PkeyIndex: 1}, initMask, unix.EINVAL)
	bad("state 9", uverbs.QPAttr{State: 9}, uverbs.QPAttrState, unix.EINVAL)
	bad("unknown mask bit", uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1}, initMask|1<<22, unix.EOPNOTSUPP)
	bad("RESET→ERR", uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState, unix.EINVAL)

	init := uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1, AccessFlags: uverbs.AccessRemoteWrite}
	if err := qp.Modify(&init, initMask); err != nil {
		t.Fatal(err)
	}
	rtr := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU2048, DestQPN: 0x1234, RQPSN: 0x1abcdef,
		MaxDestRdAtomic: 4, MinRNRTimer: 12, AV: uverbs.Path{DGID: peer, IsGlobal: true, HopLimit: 64, Port: 1}}
	for _, b := range []struct {
		what string
		edit func(a *uverbs.QPAttr) uint32
		want unix.Errno
	}{
		{"missing min_rnr_timer", func(a *uverbs.QPAttr) uint32 { return rtrMask &^ uverbs.QPAttrMinRNRTimer }, unix.EINVAL},
		{"extra sq_psn", func(a *uverbs.QPAttr) uint32 { return rtrMask | uverbs.QPAttrSQPSN }, unix.EINVAL},
		{"path mtu 0", func(a *uverbs.QPAttr) uint32 { a.PathMTU = 0; return rtrMask }, unix.EINVAL},
		{"path mtu 6", func(a *uverbs.QPAttr) uint32 { a.PathMTU = 6; return rtrMask }, unix.EINVAL},
		{"max_dest_rd_atomic 17", func(a *uverbs.QPAttr) uint32 { a.MaxDestRdAtomic = 17; return rtrMask }, unix.EINVAL},
		{"no GRH on RoCE", func(a *uverbs.QPAttr) uint32 { a.AV.IsGlobal = false; return rtrMask }, unix.EINVAL},
		{"sgid index 1", func(a *uverbs.QPAttr) uint32 { a.AV.SGIDIndex = 1; return rtrMask }, unix.ENODATA},
		{"AV port 3", func(a *uverbs.QPAttr) uint32 { a.AV.Port = 3; return rtrMask }, unix.EINVAL},
		{"min_rnr_timer 32", func(a *uverbs.QPAttr) uint32 { a.MinRNRTimer = 32; return rtrMask }, unix.EINVAL},
		{"dest qpn beyond 24 bits", func(a *uverbs.QPAttr) uint32 { a.DestQPN = 1 << 24; return rtrMask }, unix.EINVAL},
		{"alternate path", func(a *uverbs.QPAttr) uint32 { return rtrMask | uverbs.QPAttrAltPath }, unix.EINVAL},
	} {
		a := rtr
		mask := b.edit(&a)
		bad("INIT→RTR "+b.what, a, mask, b.want)
	}
	if err := qp.Modify(&rtr, rtrMask); err != nil {
		t.Fatal(err)
	}
	rts := uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 0x2abcdef, MaxRdAtomic: 16}
	for _, b := range []struct {
		what string
		edit func(a *uverbs.QPAttr) uint32
	}{
		{"missing timeout", func(a *uverbs.QPAttr) uint32 { return rtsMask &^ uverbs.QPAttrTimeout }},
		{"timeout 32", func(a *uverbs.QPAttr) uint32 { a.Timeout = 32; return rtsMask }},
		{"retry_cnt 8", func(a *uverbs.QPAttr) uint32 { a.RetryCnt = 8; return rtsMask }},
		{"rnr_retry 8", func(a *uverbs.QPAttr) uint32 { a.RNRRetry = 8; return rtsMask }},
		{"max_rd_atomic 17", func(a *uverbs.QPAttr) uint32 { a.MaxRdAtomic = 17; return rtsMask }},
		{"path mtu at RTS", func(a *uverbs.QPAttr) uint32 { return rtsMask | uverbs.QPAttrPathMTU }},
		{"cur_state INIT", func(a *uverbs.QPAttr) uint32 { a.CurState = uverbs.QPStateInit; return rtsMask | uverbs.QPAttrCurState }},
	} {
		a := rts
		mask := b.edit(&a)
		bad("RTR→RTS "+b.what, a, mask, unix.EINVAL)
	}
	if err := qp.Modify(&rts, rtsMask); err != nil {
		t.Fatal(err)
	}
	got, err := uverbs.QueryQP(x.File, qp.Handle, 0x1fffff, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != uverbs.QPStateRTS || got.PathMTU != uverbs.MTU2048 || got.DestQPN != 0x1234 || got.RQPSN != 0xabcdef ||
		got.SQPSN != 0xabcdef || got.Timeout != 14 || got.RetryCnt != 7 || got.RNRRetry != 7 || got.MaxRdAtomic != 16 ||
		got.MaxDestRdAtomic != 4 || got.MinRNRTimer != 12 || got.Port != 1 || got.AV.DGID != peer || !got.AV.IsGlobal ||
		got.AccessFlags != uverbs.AccessRemoteWrite || got.Cap.Send_wr != 64 || got.Cap.Recv_wr != 64 {
		t.Errorf("query qp: %+v", got)
	}
	// RTS→RTS may change min_rnr_timer (optional) with CUR_STATE, not the path MTU.
	a := uverbs.QPAttr{State: uverbs.QPStateRTS, CurState: uverbs.QPStateRTS, MinRNRTimer: 3}
	if err := qp.Modify(&a, uverbs.QPAttrState|uverbs.QPAttrCurState|uverbs.QPAttrMinRNRTimer); err != nil {
		t.Errorf("RTS→RTS: %v", err)
	}
	// The extended modify carries the same attributes and answers with its response length;
	// a rate limit is for raw packet QPs only.
	a.MinRNRTimer = 5
	r, err := uverbs.ModifyQPEx(x.File, qp.Handle, &a, uverbs.QPAttrState|uverbs.QPAttrMinRNRTimer, nil, nil)
	if err != nil || r.Response_length != 8 {
		t.Errorf("extended modify: %v, response_length %d", err, r.Response_length)
	}
	a.RateLimit = 1000
	_, err = uverbs.ModifyQPEx(x.File, qp.Handle, &a, uverbs.QPAttrState|uverbs.QPAttrRateLimit, nil, nil)
	wantErrno(t, "rate limit on RC", err, unix.EINVAL)
	if got, _ := uverbs.QueryQP(x.File, qp.Handle, 0, nil); got.MinRNRTimer != 5 {
		t.Errorf("min_rnr_timer %d after the extended modify, want 5", got.MinRNRTimer)
	}
	bad("RTS→RTR", uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState, unix.EINVAL)
	bad("RTS→INIT", uverbs.QPAttr{State: uverbs.QPStateInit}, uverbs.QPAttrState, unix.EINVAL)
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	bad("ERR→RTS", uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState, unix.EINVAL)
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if got, err := uverbs.QueryQP(x.File, qp.Handle, 0, nil); err != nil || got.State != uverbs.QPStateReset || got.DestQPN != 0 {
		t.Errorf("after RESET: %v %+v", err, got)
	}

	// Bad handles: a missing QP and a QP handle that is a CQ.
	wantErrno(t, "modify unknown qp", uverbs.ModifyQP(x.File, 999, &init, initMask, nil), unix.ENOENT)
	wantErrno(t, "modify a CQ handle", uverbs.ModifyQP(x.File, cq.Handle, &init, initMask, nil), unix.EINVAL)
	_, err = uverbs.QueryQP(x.File, 999, 0, nil)
	wantErrno(t, "query unknown qp", err, unix.ENOENT)

	// Only RC is emulated; a wrong CQ handle is refused before anything is created.
	in := make([]byte, mlx5.CreateQPSize)
	_, err = uverbs.CreateQP(x.File, uverbs.DriverIDMLX5, uverbs.CreateQPRequest{Type: uverbs.QPTypeUD, PD: x.PD, SendCQ: cq.Handle, RecvCQ: cq.Handle, AsyncFD: -1}, in, nil)
	wantErrno(t, "UD QP", err, unix.EOPNOTSUPP)
	_, err = uverbs.CreateQPWrite(x.File, uverbs.CreateQPRequest{Type: 77, PD: x.PD, SendCQ: cq.Handle, RecvCQ: cq.Handle}, in, nil)
	wantErrno(t, "QP type 77", err, unix.EINVAL)
	_, err = uverbs.CreateQPWrite(x.File, uverbs.CreateQPRequest{Type: uverbs.QPTypeRC, PD: x.PD, SendCQ: 999, RecvCQ: cq.Handle}, in, nil)
	wantErrno(t, "unknown send CQ (write)", err, unix.ENOENT)
	_, err = uverbs.CreateQP(x.File, uverbs.DriverIDMLX5, uverbs.CreateQPRequest{Type: uverbs.QPTypeRC, PD: x.PD, SendCQ: 999, RecvCQ: cq.Handle, AsyncFD: -1}, in, nil)
	wantErrno(t, "unknown send CQ (ioctl)", err, unix.ENOENT)
	_, err = uverbs.CreateQP(x.File, uverbs.DriverIDMLX5, uverbs.CreateQPRequest{Type: uverbs.QPTypeRC, PD: cq.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, AsyncFD: -1}, in, nil)
	wantErrno(t, "CQ handle as PD (ioctl)", err, unix.EINVAL)
}

// Bfregs go to QPs as mlx5_ib's alloc_bfreg hands them out: the low-latency ones (the last
// LowLatencyBfregs) one QP each, then the medium-latency ones shared, least used first, so a
// context takes any number of QPs; QPs sharing a register carry traffic together.
func TestBfregsPerQP(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	x := emutest.Open(t, c.Hosts[0].Devices[0])
	cq := x.CreateCQ(256, -1)
	const tot, low = emutest.TotalBfregs, emutest.LowLatencyBfregs
	const med = tot - low - 1
	var want []uint32
	for i := uint32(med + 1); i < tot; i++ {
		want = append(want, i)
	}
	for round := 0; round < 2; round++ {
		for i := uint32(1); i <= med; i++ {
			want = append(want, i)
		}
	}
	want = append(want, 1, 2, 3)
	qps := make([]*emutest.QP, len(want))
	for i, net := range want {
		qps[i] = x.CreateQP(cq, cq, emutest.QPSize{SQWQEBBs: 4, RQWQEs: 4, RecvSGE: 1})
		if g := qps[i].BF.Index(); g != mlx5.GrossBfregIndex(net) {
			t.Fatalf("QP %d on gross bfreg %d, want net %d (gross %d)", i, g, net, mlx5.GrossBfregIndex(net))
		}
	}
	// A freed low-latency bfreg goes to the next QP again.
	if _, err := uverbs.DestroyQP(x.File, uverbs.DriverIDMLX5, qps[1].Handle); err != nil {
		t.Fatal(err)
	}
	if q := x.CreateQP(cq, cq, emutest.QPSize{SQWQEBBs: 4, RQWQEs: 4, RecvSGE: 1}); q.BF.Index() != qps[1].BF.Index() {
		t.Fatalf("after freeing bfreg %d the next QP got %d", qps[1].BF.Index(), q.BF.Index())
	}
	// QPs 4 and 4+med share net bfreg 1: connected to each other, both ring it.
	sharedTraffic(t, x, cq, qps[low], qps[low+med])
}

// sharedTraffic connects a and b (two QPs of x on one register) and runs WRITEs both ways.
func sharedTraffic(t *testing.T, x *emutest.Ctx, cq *emutest.CQ, a, b *emutest.QP) {
	t.Helper()
	if a.BF.Index() != b.BF.Index() {
		t.Fatalf("QPs on bfregs %d and %d, want one shared", a.BF.Index(), b.BF.Index())
	}
	emutest.Connect(t, a, b, emutest.DefaultConn)
	m := x.RegMR(16384, emutest.AllAccess)
	fill(14, m.Buf[:8192])
	for i := range 3 {
		for k, q := range []*emutest.QP{a, b} {
			off := k*4096 + i*1000
			q.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(m, m.Buf[off:off+1000])}, RemoteAddr: m.Addr() + 8192 + uint64(off), RKey: m.RKey})
			if wc := cq.Wait(t, wait); wc.Status != mlx5.WCSuccess || wc.QPN != q.QPN {
				t.Fatalf("WRITE %d of QP %#x through bfreg %d: %+v", i, q.QPN, q.BF.Index(), wc)
			}
		}
	}
	if !bytes.Equal(m.Buf[8192:8192+3000], m.Buf[:3000]) || !bytes.Equal(m.Buf[12288:12288+3000], m.Buf[4096:7096]) {
		t.Error("data differs")
	}
}

// openCtx gets a context with the given bfreg request: v2, or the 8-byte v1 request (which
// makes mlx5_ib put every QP on bfreg 0).
func openCtx(t *testing.T, dev *emu.Device, tot, low uint32, v2 bool) *emutest.Ctx {
	t.Helper()
	f, err := dev.Open()
	if err != nil {
		t.Fatal(err)
	}
	x := &emutest.Ctx{T: t, Dev: dev, File: f, AsyncFD: -1}
	t.Cleanup(x.Close)
	req := mlx5.AllocUcontextReqV2{TotalNumBfregs: tot, NumLowLatencyBfregs: low, LibCaps: mlx5.LibCap4KUAR}
	in := make([]byte, mlx5.AllocUcontextReqV2Size)
	req.Put(in)
	if !v2 {
		in = in[:mlx5.AllocUcontextReqMinSize]
		req.LibCaps = 0
	}
	out := make([]byte, mlx5.AllocUcontextRespSize)
	uc, err := uverbs.GetContext(f, uverbs.DriverIDMLX5, in, out)
	if err != nil {
		t.Fatalf("get context: %v", err)
	}
	x.AsyncFD = uc.AsyncFD
	if x.Resp, err = mlx5.DecodeAllocUcontextResp(out); err != nil {
		t.Fatal(err)
	}
	if x.Layout, err = mlx5.LayoutFromResp(&x.Resp, &req, os.Getpagesize()); err != nil {
		t.Fatal(err)
	}
	for i := range x.Layout.NumSysPages() {
		m, err := f.Mmap(mlx5.MmapOffset(mlx5.MmapRegularPage, i, os.Getpagesize()), os.Getpagesize())
		if err != nil {
			t.Fatal(err)
		}
		x.UARs = append(x.UARs, m)
	}
	if x.PD, err = uverbs.AllocPD(f, nil, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	return x
}

// Without a medium-latency class (every BlueFlame bfreg low latency), or for a v1 request,
// mlx5_ib puts the QPs beyond the dedicated ones on bfreg 0, which has no BlueFlame buffer
// and is rung with 8-byte doorbells at one offset; they share it and carry traffic.
func TestBfregZeroShared(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	dev := c.Hosts[0].Devices[0]
	for _, v2 := range []bool{true, false} {
		x := openCtx(t, dev, 4, 3, v2)
		cq := x.CreateCQ(64, -1)
		var want []uint32
		if v2 {
			want = []uint32{1, 2, 3}
		}
		want = append(want, 0, 0, 0)
		qps := make([]*emutest.QP, len(want))
		for i, net := range want {
			qps[i] = x.CreateQP(cq, cq, emutest.QPSize{SQWQEBBs: 4, RQWQEs: 4, RecvSGE: 1})
			if g := qps[i].BF.Index(); g != mlx5.GrossBfregIndex(net) {
				t.Fatalf("v2 %v: QP %d on gross bfreg %d, want %d", v2, i, g, mlx5.GrossBfregIndex(net))
			}
		}
		sharedTraffic(t, x, cq, qps[len(qps)-2], qps[len(qps)-1])
	}
}

// alloc_ucontext refuses bfreg requests as mlx5_ib does: no bfreg, or every one low latency,
// is EINVAL; more than MLX5_MAX_BFREGS once rounded to whole UARs is ENOMEM.
func TestAllocUcontextBfregLimits(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	dev := c.Hosts[0].Devices[0]
	for _, k := range []struct {
		tot, low uint32
		errno    unix.Errno
		gotTot   uint32
	}{
		{0, 0, unix.EINVAL, 0},
		{4, 4, unix.EINVAL, 0},
		{3, 4, unix.EINVAL, 0}, // rounded to 4 first
		{3, 3, 0, 4},
		{mlx5.MaxBfregs, mlx5.MaxBfregs - 1, 0, mlx5.MaxBfregs},
		{mlx5.MaxBfregs + 1, 0, unix.ENOMEM, 0},
		{1 << 20, 0, unix.ENOMEM, 0},
	} {
		f, err := dev.Open()
		if err != nil {
			t.Fatal(err)
		}
		req := mlx5.AllocUcontextReqV2{TotalNumBfregs: k.tot, NumLowLatencyBfregs: k.low, LibCaps: mlx5.LibCap4KUAR}
		in := make([]byte, mlx5.AllocUcontextReqV2Size)
		req.Put(in)
		out := make([]byte, mlx5.AllocUcontextRespSize)
		uc, err := uverbs.GetContext(f, uverbs.DriverIDMLX5, in, out)
		what := fmt.Sprintf("total %d low %d", k.tot, k.low)
		if k.errno != 0 {
			wantErrno(t, what, err, k.errno)
		} else if err != nil {
			t.Errorf("%s: %v", what, err)
		} else {
			unix.Close(uc.AsyncFD)
			if r, err := mlx5.DecodeAllocUcontextResp(out); err != nil || r.TotBfregs != k.gotTot {
				t.Errorf("%s: tot_bfregs %d (%v), want %d", what, r.TotBfregs, err, k.gotTot)
			}
		}
		f.Close()
	}
}

func readAsync(t *testing.T, fd int) uverbs.AsyncEventDesc {
	t.Helper()
	ok, err := uverbs.WaitReadable(fd, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("async fd not readable: %v", err)
	}
	ev, err := uverbs.ReadAsyncEvent(fd)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestPortEvents(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	x := emutest.Open(t, c.Hosts[0].Devices[0])
	ep := c.Endpoint(0, 0, 1)
	ep.SetLinkUp(false)
	if ev := readAsync(t, x.AsyncFD); ev.Type != uverbs.EventPortErr || ev.Element != 1 {
		t.Errorf("link down: event %+v, want PORT_ERR on port 1", ev)
	}
	p, err := uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 1)
	if err != nil || p.Legacy_resp.State != uverbs.PortDown {
		t.Errorf("port state after link down: %v %d", err, p.Legacy_resp.State)
	}
	ep.SetLinkUp(true)
	if ev := readAsync(t, x.AsyncFD); ev.Type != uverbs.EventPortActive || ev.Element != 1 {
		t.Errorf("link up: event %+v, want PORT_ACTIVE on port 1", ev)
	}
	if p, _ := uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 1); p.Legacy_resp.State != uverbs.PortActive {
		t.Errorf("port state after link up: %d", p.Legacy_resp.State)
	}
}

func TestRegistry(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: "emlx5reg_"})
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]uverbs.DeviceInfo{}
	for _, d := range devs {
		found[d.Name] = d
	}
	for i := range 4 {
		name := "emlx5reg_" + string(rune('0'+i))
		d, ok := found[name]
		if !ok || !d.Emulated || len(d.Ports) != 1 || d.Ports[0].LinkLayer != "Ethernet" || len(d.Ports[0].GIDs) != 1 {
			t.Errorf("%s: %+v (found %v)", name, d, ok)
		}
	}
	f, info, err := uverbs.Open("emlx5reg_3")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if info.Ports[0].GIDs[0].GID.String() != "10.1.0.2" {
		t.Errorf("emlx5reg_3 GID %v, want ::ffff:10.1.0.2 (host 1, NIC 1)", info.Ports[0].GIDs[0].GID)
	}
	_ = c
}

// create_qp checks the capabilities and the mlx5 ring geometry against the device limits.
func TestCreateQPLimits(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	x := emutest.Open(t, c.Hosts[0].Devices[0])
	cq := x.CreateCQ(16, -1)
	buf := x.Mem(1 << 20)
	db := x.Mem(64)
	try := func(what string, qc uverbs.QPCap, ud mlx5.CreateQP, want unix.Errno) {
		t.Helper()
		ud.BufAddr, ud.DBAddr = uverbs.Addr(buf), uverbs.Addr(db)
		in := make([]byte, mlx5.CreateQPSize)
		ud.Put(in)
		_, err := uverbs.CreateQP(x.File, uverbs.DriverIDMLX5, uverbs.CreateQPRequest{Type: uverbs.QPTypeRC, PD: x.PD,
			SendCQ: cq.Handle, RecvCQ: cq.Handle, AsyncFD: -1, Cap: qc}, in, make([]byte, mlx5.CreateQPRespSize))
		if want == 0 {
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
			return
		}
		wantErrno(t, what, err, want)
	}
	ring := mlx5.CreateQP{SQWQECount: 64, RQWQECount: 64, RQWQEShift: 4}
	caps := uverbs.QPCap{Send_wr: 64, Recv_wr: 64, Send_sge: 1, Recv_sge: 1}
	big := caps
	big.Send_sge = 31
	try("max_send_sge 31 (device max 30)", big, ring, unix.EINVAL)
	big = caps
	big.Inline_data = 4096
	try("max_inline_data 4096", big, ring, unix.EINVAL)
	big = caps
	big.Send_wr = 1<<15 + 1
	try("max_send_wr beyond max_qp_wr", big, ring, unix.EINVAL)
	r := ring
	r.SQWQECount = 48
	try("sq_wqe_count not a power of two", caps, r, unix.EINVAL)
	r = ring
	r.RQWQEShift = 2
	try("rq stride of 4 bytes", caps, r, unix.EINVAL)
	big = caps
	big.Recv_wr = 128
	try("max_recv_wr above the RQ ring", big, ring, unix.EINVAL)
	r = ring
	r.Flags = 1 << 7
	try("unknown mlx5 create flag", caps, r, unix.EOPNOTSUPP)
	try("good", caps, ring, 0)
}
