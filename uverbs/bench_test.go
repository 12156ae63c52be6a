package uverbs

import "testing"

// BenchmarkIoctlCreateQPDecoded measures one QP_CREATE ioctl marshalled by CreateQP and
// decoded, checked and answered by the server-side code, as the emulated kernel does it: the
// control-path cost the emulator adds per command, without any device work.
func BenchmarkIoctlCreateQPDecoded(b *testing.B) {
	specs := []AttrSpec{
		{ID: AttrCreateQPHandle, Kind: AttrIDR, Mandatory: true},
		{ID: AttrCreateQPPDHandle, Kind: AttrIDR},
		{ID: AttrCreateQPSendCQHandle, Kind: AttrIDR},
		{ID: AttrCreateQPRecvCQHandle, Kind: AttrIDR},
		{ID: AttrCreateQPUserHandle, Kind: AttrPtrIn, Mandatory: true, MinLen: 8, MaxLen: 8},
		{ID: AttrCreateQPCap, Kind: AttrPtrIn, Mandatory: true, MinLen: 20, MaxLen: 20},
		{ID: AttrCreateQPType, Kind: AttrConstIn, Mandatory: true, MinLen: 8, MaxLen: 8},
		{ID: AttrCreateQPRespCap, Kind: AttrPtrOut, Mandatory: true, MinLen: 20},
		{ID: AttrCreateQPRespQPNum, Kind: AttrPtrOut, Mandatory: true, MinLen: 4},
		{ID: AttrUHWIn, Kind: AttrPtrIn},
		{ID: AttrUHWOut, Kind: AttrPtrOut},
	}
	k := &fakeKernel{ioctl: func(r *IoctlRequest) error {
		if err := r.Check(specs); err != nil {
			return err
		}
		c, err := r.In(AttrCreateQPCap)
		if err != nil {
			return err
		}
		if _, _, err := r.Driver(); err != nil {
			return err
		}
		if err := r.Out(AttrCreateQPRespCap, c); err != nil {
			return err
		}
		if err := r.Out(AttrCreateQPRespQPNum, []byte{1, 0, 0, 0}); err != nil {
			return err
		}
		if err := r.DriverOut(make([]byte, 32)); err != nil {
			return err
		}
		return r.SetObj(AttrCreateQPHandle, 1)
	}}
	req := CreateQPRequest{Type: QPTypeRC, PD: 1, SendCQ: 1, RecvCQ: 1,
		Cap: QPCap{Send_wr: 64, Recv_wr: 64, Send_sge: 1, Recv_sge: 1}, AsyncFD: -1}
	din, dout := make([]byte, 48), make([]byte, 32)
	b.ReportAllocs()
	for b.Loop() {
		k.raw = k.raw[:0]
		if _, err := CreateQP(k, 0, req, din, dout); err != nil {
			b.Fatal(err)
		}
	}
}
