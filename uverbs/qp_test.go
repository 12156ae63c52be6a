package uverbs

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// allModifyMask is every bit the legacy MODIFY_QP accepts.
const allModifyMask = QPAttrRateLimit - 1

func randomPath(r *rand.Rand) Path {
	var p Path
	r.Read(p.DGID[:])
	p.FlowLabel = r.Uint32() & 0xfffff
	p.SGIDIndex, p.HopLimit, p.TrafficClass = uint8(r.Intn(256)), uint8(r.Intn(256)), uint8(r.Intn(256))
	p.DLID = uint16(r.Intn(65536))
	p.SL, p.SrcPathBits, p.StaticRate = uint8(r.Intn(16)), uint8(r.Intn(128)), uint8(r.Intn(20))
	p.IsGlobal = r.Intn(2) == 1
	p.Port = uint8(1 + r.Intn(2))
	return p
}

func randomQPAttr(r *rand.Rand) QPAttr {
	return QPAttr{
		State: uint8(r.Intn(7)), CurState: uint8(r.Intn(7)), EnSQDAsyncNotify: r.Intn(2) == 1,
		AccessFlags: uint32(r.Intn(16)), PkeyIndex: uint16(r.Intn(128)), Port: uint8(1 + r.Intn(2)),
		Qkey: r.Uint32(), AV: randomPath(r), PathMTU: uint8(1 + r.Intn(5)), Timeout: uint8(r.Intn(32)),
		RetryCnt: uint8(r.Intn(8)), RNRRetry: uint8(r.Intn(8)), RQPSN: r.Uint32() & 0xffffff,
		MaxRdAtomic: uint8(r.Intn(16)), AltPath: randomPath(r), AltPkeyIndex: uint16(r.Intn(128)),
		AltPort: uint8(1 + r.Intn(2)), AltTimeout: uint8(r.Intn(32)), MinRNRTimer: uint8(r.Intn(32)),
		SQPSN: r.Uint32() & 0xffffff, MaxDestRdAtomic: uint8(r.Intn(16)), PathMigState: uint8(r.Intn(3)),
		DestQPN: r.Uint32() & 0xffffff,
	}
}

// clearUnmasked zeroes what ModifyQP must not send for mask.
func clearUnmasked(a QPAttr, mask uint32) QPAttr {
	var z QPAttr
	keep := func(bit uint32, f func()) {
		if mask&bit == 0 {
			f()
		}
	}
	keep(QPAttrState, func() { a.State = z.State })
	keep(QPAttrCurState, func() { a.CurState = z.CurState })
	keep(QPAttrEnSQDAsyncNotify, func() { a.EnSQDAsyncNotify = false })
	keep(QPAttrAccessFlags, func() { a.AccessFlags = 0 })
	keep(QPAttrPkeyIndex, func() { a.PkeyIndex = 0 })
	keep(QPAttrPort, func() { a.Port = 0 })
	keep(QPAttrQkey, func() { a.Qkey = 0 })
	keep(QPAttrAV, func() { a.AV = Path{} })
	keep(QPAttrPathMTU, func() { a.PathMTU = 0 })
	keep(QPAttrTimeout, func() { a.Timeout = 0 })
	keep(QPAttrRetryCnt, func() { a.RetryCnt = 0 })
	keep(QPAttrRNRRetry, func() { a.RNRRetry = 0 })
	keep(QPAttrRQPSN, func() { a.RQPSN = 0 })
	keep(QPAttrMaxQPRdAtomic, func() { a.MaxRdAtomic = 0 })
	keep(QPAttrAltPath, func() { a.AltPath, a.AltPkeyIndex, a.AltPort, a.AltTimeout = Path{}, 0, 0, 0 })
	keep(QPAttrMinRNRTimer, func() { a.MinRNRTimer = 0 })
	keep(QPAttrSQPSN, func() { a.SQPSN = 0 })
	keep(QPAttrMaxDestRdAtomic, func() { a.MaxDestRdAtomic = 0 })
	keep(QPAttrPathMigState, func() { a.PathMigState = 0 })
	keep(QPAttrDestQPN, func() { a.DestQPN = 0 })
	return a
}

// TestModifyQPCarriesEveryMaskBit sends random attributes under random masks through the
// legacy MODIFY_QP and decodes them on the kernel side: exactly the masked fields arrive.
func TestModifyQPCarriesEveryMaskBit(t *testing.T) {
	seed := int64(20261122)
	r := rand.New(rand.NewSource(seed))
	for i := 0; i < 300; i++ {
		a := randomQPAttr(r)
		mask := r.Uint32() & allModifyMask
		if i == 0 {
			mask = allModifyMask
		}
		var got QPAttr
		var gotMask, gotHandle uint32
		k := &fakeKernel{write: func(w *WriteRequest) error {
			if w.Extended || w.Command != CmdModifyQP {
				return unix.EINVAL
			}
			if err := w.CheckSizes(sizeOf[ModifyQPCmd](), 0); err != nil {
				return err
			}
			c := fromBytes[ModifyQPCmd](w.Core())
			got, gotMask, gotHandle = QPAttrFromModify(&c), c.Attr_mask, c.Qp_handle
			return nil
		}}
		if err := ModifyQP(k, 11, &a, mask, nil); err != nil {
			t.Fatalf("seed %d iter %d: %v", seed, i, err)
		}
		want := clearUnmasked(a, mask)
		if gotMask != mask || gotHandle != 11 {
			t.Fatalf("seed %d iter %d: mask %#x handle %d", seed, i, gotMask, gotHandle)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("seed %d iter %d mask %#x: (-want +got)\n%s", seed, i, mask, d)
		}
	}
	// Rate limit only exists on the extended command, as in rdma-core.
	if err := ModifyQP(&fakeKernel{}, 1, &QPAttr{}, QPAttrRateLimit, nil); !errorsIs(err, unix.EOPNOTSUPP) {
		t.Errorf("rate limit on legacy modify: %v", err)
	}
}

func TestQueryQPRoundTrip(t *testing.T) {
	seed := int64(7)
	r := rand.New(rand.NewSource(seed))
	a := randomQPAttr(r)
	a.EnSQDAsyncNotify = false // not part of the query response
	a.RateLimit = 0
	a.Cap = QPCap{Send_wr: 64, Recv_wr: 32, Send_sge: 2, Recv_sge: 1, Inline_data: 128}
	a.SQDraining, a.SigAll = true, true
	k := &fakeKernel{write: func(w *WriteRequest) error {
		if err := w.CheckSizes(sizeOf[QueryQPCmd](), sizeOf[QueryQPResp]()); err != nil {
			return err
		}
		c := fromBytes[QueryQPCmd](w.Core())
		if c.Qp_handle != 9 || c.Attr_mask != allModifyMask {
			return unix.EINVAL
		}
		resp := a.QueryResp()
		return w.Respond(structBytes(&resp))
	}}
	got, err := QueryQP(k, 9, allModifyMask, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, got); d != "" {
		t.Errorf("seed %d (-sent +got)\n%s", seed, d)
	}
}

func TestCreateQPIoctl(t *testing.T) {
	k := &fakeKernel{ioctl: func(r *IoctlRequest) error {
		if err := r.Check([]AttrSpec{
			{ID: AttrCreateQPHandle, Kind: AttrIDR, Mandatory: true},
			{ID: AttrCreateQPPDHandle, Kind: AttrIDR},
			{ID: AttrCreateQPSendCQHandle, Kind: AttrIDR},
			{ID: AttrCreateQPRecvCQHandle, Kind: AttrIDR},
			{ID: AttrCreateQPUserHandle, Kind: AttrPtrIn, Mandatory: true, MinLen: 8, MaxLen: 8},
			{ID: AttrCreateQPCap, Kind: AttrPtrIn, Mandatory: true, MinLen: 20, MaxLen: 20},
			{ID: AttrCreateQPType, Kind: AttrConstIn, Mandatory: true, MinLen: 1, MaxLen: 8},
			{ID: AttrCreateQPFlags, Kind: AttrPtrIn, MinLen: 4, MaxLen: 8},
			{ID: AttrCreateQPEventFD, Kind: AttrFD},
			{ID: AttrCreateQPRespCap, Kind: AttrPtrOut, Mandatory: true, MinLen: 20, MaxLen: 20},
			{ID: AttrCreateQPRespQPNum, Kind: AttrPtrOut, Mandatory: true, MinLen: 4, MaxLen: 4},
			{ID: AttrUHWIn, Kind: AttrPtrIn},
			{ID: AttrUHWOut, Kind: AttrPtrOut},
		}); err != nil {
			return err
		}
		capb, err := r.In(AttrCreateQPCap)
		if err != nil {
			return err
		}
		c := fromBytes[QPCap](capb)
		typ, _ := r.Const(AttrCreateQPType)
		fl, _ := r.Const(AttrCreateQPFlags)
		pd, _ := r.Obj(AttrCreateQPPDHandle)
		if c.Send_wr != 10 || c.Inline_data != 64 || typ != QPTypeRC || fl != QPCreateSQSigAll || pd != 2 {
			return unix.EINVAL
		}
		c.Send_wr = 16
		if err := r.Out(AttrCreateQPRespCap, structBytes(&c)); err != nil {
			return err
		}
		if err := r.Out(AttrCreateQPRespQPNum, []byte{0x11, 0, 0, 0}); err != nil {
			return err
		}
		return r.SetObj(AttrCreateQPHandle, 3)
	}}
	qp, err := CreateQP(k, 0, CreateQPRequest{Type: QPTypeRC, PD: 2, SendCQ: 1, RecvCQ: 1,
		Cap: QPCap{Send_wr: 10, Recv_wr: 10, Send_sge: 1, Recv_sge: 1, Inline_data: 64}, SigAll: true, AsyncFD: -1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if qp.Handle != 3 || qp.QPN != 0x11 || qp.Cap.Send_wr != 16 || qp.Cap.Inline_data != 64 {
		t.Errorf("qp %+v", qp)
	}
}
