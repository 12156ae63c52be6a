package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWriteLegacyBytes(t *testing.T) {
	k := &fakeKernel{write: func(w *WriteRequest) error {
		if err := w.CheckSizes(sizeOf[RegMRCmd](), sizeOf[RegMRResp]()); err != nil {
			return err
		}
		core := fromBytes[RegMRCmd](w.Core())
		if core.Start != 0x1000 || core.Length != 4096 || core.Hca_va != 0x2000 || core.Pd_handle != 3 ||
			core.Access_flags != AccessLocalWrite|AccessRemoteWrite {
			return unix.EINVAL
		}
		if !bytes.Equal(w.DriverIn(), []byte{9, 9, 9, 9, 9, 9, 9, 9}) || w.DriverOutLen != 8 {
			return unix.EINVAL
		}
		resp := RegMRResp{Handle: 5, Lkey: 0x100, Rkey: 0x200}
		if err := w.Respond(structBytes(&resp)); err != nil {
			return err
		}
		return w.RespondDriver([]byte{1, 2, 3, 4, 5, 6, 7, 8, 0xff})
	}}
	dout := make([]byte, 8)
	mr, err := RegMR(k, RegMRRequest{Start: 0x1000, Length: 4096, HCAVA: 0x2000, PD: 3,
		Access: AccessLocalWrite | AccessRemoteWrite}, []byte{9, 9, 9, 9, 9, 9, 9, 9}, dout)
	if err != nil {
		t.Fatal(err)
	}
	if mr != (MR{Handle: 5, LKey: 0x100, RKey: 0x200}) || !bytes.Equal(dout, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("mr %+v driver out % x", mr, dout)
	}
	// The header as rdma-core writes it: in_words counts the whole request, out_words the
	// whole response, both in 4-byte words (offsets from ib_user_verbs.h).
	b := k.raw[0]
	le := binary.NativeEndian
	if le.Uint32(b) != CmdRegMR || int(le.Uint16(b[4:]))*4 != len(b) || len(b) != 8+40+8 ||
		le.Uint16(b[6:]) != (12+8)/4 || le.Uint64(b[8:]) == 0 {
		t.Errorf("header % x", b[:16])
	}
}

func TestWriteExBytes(t *testing.T) {
	k := &fakeKernel{write: func(w *WriteRequest) error {
		if !w.Extended || w.Command != ExCmdModifyQP || w.CoreInLen != sizeOf[ExModifyQPCmd]() ||
			w.CoreOutLen != 8 || w.DriverInLen != 16 || w.DriverOutLen != 8 {
			return unix.EINVAL
		}
		if err := w.CheckSizes(sizeOf[ExModifyQPCmd](), 8); err != nil {
			return err
		}
		cmd := fromBytes[ExModifyQPCmd](w.Core())
		if cmd.Limit != 77 || cmd.Base.Attr_mask != QPAttrRateLimit|QPAttrState || cmd.Base.Qp_state != QPStateRTS {
			return unix.EINVAL
		}
		resp := ExModifyQPResp{Response_length: 8}
		if err := w.Respond(structBytes(&resp)); err != nil {
			return err
		}
		return w.RespondDriver([]byte{7, 7, 7, 7, 7, 7, 7, 7})
	}}
	dout := make([]byte, 8)
	resp, err := ModifyQPEx(k, 4, &QPAttr{State: QPStateRTS, RateLimit: 77}, QPAttrRateLimit|QPAttrState,
		make([]byte, 16), dout)
	if err != nil || resp.Response_length != 8 || dout[7] != 7 {
		t.Fatalf("resp %+v dout % x err %v", resp, dout, err)
	}
	b := k.raw[0]
	le := binary.NativeEndian
	if le.Uint32(b) != CmdFlagExtended|ExCmdModifyQP || int(le.Uint16(b[4:]))*8 != sizeOf[ExModifyQPCmd]() ||
		le.Uint16(b[6:]) != 1 || le.Uint16(b[16:]) != 2 || le.Uint16(b[18:]) != 1 || le.Uint32(b[20:]) != 0 {
		t.Errorf("headers % x", b[:24])
	}
}

func TestParseWriteErrors(t *testing.T) {
	le := binary.NativeEndian
	legacy := func(cmd uint32, inWords uint16, n int) []byte {
		b := make([]byte, n)
		le.PutUint32(b, cmd)
		le.PutUint16(b[4:], inWords)
		return b
	}
	ex := func(in, out, pin, pout uint16, resp uint64, reserved uint32, payload int) []byte {
		b := make([]byte, 24+payload)
		le.PutUint32(b, CmdFlagExtended|ExCmdQueryDevice)
		le.PutUint16(b[4:], in)
		le.PutUint16(b[6:], out)
		le.PutUint64(b[8:], resp)
		le.PutUint16(b[16:], pin)
		le.PutUint16(b[18:], pout)
		le.PutUint32(b[20:], reserved)
		return b
	}
	cases := []struct {
		name string
		buf  []byte
		want error
	}{
		{"short", make([]byte, 4), unix.EINVAL},
		{"unknown flag bits", legacy(0x1000|CmdAllocPD, 4, 16), unix.EINVAL},
		{"in_words mismatch", legacy(CmdAllocPD, 3, 16), unix.EINVAL},
		{"unaligned count", legacy(CmdAllocPD, 4, 17), unix.EINVAL},
		{"legacy ok", legacy(CmdAllocPD, 4, 16), nil},
		{"ex short", legacy(CmdFlagExtended|ExCmdQueryDevice, 0, 12), unix.EINVAL},
		{"ex word mismatch", ex(2, 1, 0, 0, 0x1000, 0, 8), unix.EINVAL},
		{"ex reserved", ex(1, 1, 0, 0, 0x1000, 1, 8), unix.EINVAL},
		{"ex response without words", ex(1, 0, 0, 0, 0x1000, 0, 8), unix.EINVAL},
		{"ex words without response", ex(1, 1, 0, 0, 0, 0, 8), unix.EINVAL},
		{"ex ok", ex(1, 1, 1, 0, 0x1000, 0, 16), nil},
	}
	for _, c := range cases {
		_, err := ParseWrite(c.buf)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	w, _ := ParseWrite(legacy(CmdAllocPD, 4, 16))
	if err := w.CheckSizes(16, 0); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("short core request: %v", err)
	}
	if err := w.CheckSizes(8, 4); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("short response: %v", err)
	}
}

func TestWriteErrorNamesCommand(t *testing.T) {
	k := &fakeKernel{write: func(w *WriteRequest) error { return unix.ENOSYS }}
	_, err := QueryDevice(k)
	var ce *CmdError
	if !errors.As(err, &ce) || ce.Op != "write EX_QUERY_DEVICE" || !errors.Is(err, unix.ENOSYS) {
		t.Fatalf("err = %v", err)
	}
	if _, err := AllocPD(k, nil, nil); !errors.Is(err, unix.ENOSYS) || !bytes.Contains([]byte(err.Error()), []byte("ALLOC_PD")) {
		t.Errorf("err = %v", err)
	}
}
