package mlx5

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The syndrome table of mlx5_handle_error_cqe (rdma-core providers/mlx5/cq.c), written out.
func TestStatusFromSyndrome(t *testing.T) {
	want := map[uint8]WCStatus{
		0x01: WCLocLenErr, 0x02: WCLocQPOpErr, 0x04: WCLocProtErr, 0x05: WCWRFlushErr, 0x06: WCMWBindErr,
		0x10: WCBadRespErr, 0x11: WCLocAccessErr, 0x12: WCRemInvReqErr, 0x13: WCRemAccessErr,
		0x14: WCRemOpErr, 0x15: WCRetryExcErr, 0x16: WCRNRRetryExcErr, 0x22: WCRemAbortErr,
	}
	for s := 0; s < 256; s++ {
		w, ok := want[uint8(s)]
		if !ok {
			w = WCGeneralErr
		}
		if got := StatusFromSyndrome(uint8(s)); got != w {
			t.Errorf("syndrome %#x -> %v, want %v", s, got, w)
		}
		if ok {
			if back, ok2 := SyndromeForStatus(w); !ok2 || back != uint8(s) {
				t.Errorf("SyndromeForStatus(%v) = %#x, %v", w, back, ok2)
			}
		}
	}
}

func TestCompletion(t *testing.T) {
	cases := []struct {
		name string
		cqe  CQE64
		want WC
	}{
		{"write imm requester", CQE64{SopDropQPN: uint32(OpcodeRDMAWriteImm)<<24 | 0x12, WQECounter: 9, OpOwn: CQEReq << 4},
			WC{Opcode: WCRDMAWrite, Flags: WCFlagWithImm, QPN: 0x12, WQECounter: 9, OpcodeKnown: true}},
		{"read requester", CQE64{SopDropQPN: uint32(OpcodeRDMARead)<<24 | 1, ByteCnt: 4096, OpOwn: CQEReq << 4},
			WC{Opcode: WCRDMARead, ByteLen: 4096, QPN: 1, OpcodeKnown: true}},
		{"fadd requester", CQE64{SopDropQPN: uint32(OpcodeAtomicFA) << 24, ByteCnt: 99, OpOwn: CQEReq << 4},
			WC{Opcode: WCFetchAdd, ByteLen: 8, OpcodeKnown: true}},
		{"nop requester", CQE64{SopDropQPN: uint32(OpcodeNOP) << 24, OpOwn: CQEReq << 4}, WC{}},
		{"send imm responder", CQE64{SopDropQPN: 3, ByteCnt: 64, ImmInvalPKey: 0xdeadbeef, FlagsRQPN: 2<<28 | 0x77, OpOwn: CQERespSendImm << 4},
			WC{Opcode: WCRecv, Flags: WCFlagWithImm | WCFlagGRH, ByteLen: 64, Imm: 0xdeadbeef, QPN: 3, SrcQP: 0x77, PKeyIndex: 0xbeef, Receive: true, OpcodeKnown: true}},
		{"write imm responder", CQE64{ImmInvalPKey: 5, OpOwn: CQERespWrImm << 4},
			WC{Opcode: WCRecvRDMAWithImm, Flags: WCFlagWithImm, Imm: 5, PKeyIndex: 5, Receive: true, OpcodeKnown: true}},
		{"retry exceeded", CQE64{Syndrome: SyndromeTransportRetryExc, VendorSyndrome: 0x81, SopDropQPN: 4, WQECounter: 2, OpOwn: CQEReqErr << 4},
			WC{Status: WCRetryExcErr, VendorErr: 0x81, QPN: 4, WQECounter: 2}},
		{"responder flush", CQE64{Syndrome: SyndromeWRFlushErr, OpOwn: CQERespErr << 4},
			WC{Status: WCWRFlushErr, Receive: true}},
	}
	for _, c := range cases {
		if got := c.cqe.Completion(); got != c.want {
			t.Errorf("%s:\n got  %+v\n want %+v", c.name, got, c.want)
		}
	}
}

func TestDecodersRejectShortInput(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"ctrl":           func(b []byte) error { _, err := DecodeCtrlSeg(b); return err },
		"raddr":          func(b []byte) error { _, err := DecodeRaddrSeg(b); return err },
		"atomic":         func(b []byte) error { _, err := DecodeAtomicSeg(b); return err },
		"data":           func(b []byte) error { _, err := DecodeDataSeg(b); return err },
		"cqe64":          func(b []byte) error { _, err := DecodeCQE64(b); return err },
		"ucontext req":   func(b []byte) error { _, err := DecodeAllocUcontextReq(b); return err },
		"ucontext resp":  func(b []byte) error { _, err := DecodeAllocUcontextResp(b); return err },
		"create cq":      func(b []byte) error { _, err := DecodeCreateCQ(b); return err },
		"create cq resp": func(b []byte) error { _, err := DecodeCreateCQResp(b); return err },
		"create qp":      func(b []byte) error { _, err := DecodeCreateQP(b); return err },
		"create qp resp": func(b []byte) error { _, err := DecodeCreateQPResp(b); return err },
	}
	for name, d := range decoders {
		err := d(make([]byte, 3))
		if !errors.Is(err, ErrShort) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want ErrShort and EINVAL", name, err)
		}
	}
	// A prefix at the minimum length decodes, missing fields read as zero.
	b := make([]byte, CreateQPMinSize)
	b[0] = 1
	q, err := DecodeCreateQP(b)
	if err != nil || q.ECEOptions != 0 || q.BufAddr == 0 {
		t.Errorf("create_qp prefix: %+v %v", q, err)
	}
}

// The structural rules mlx5_ib applies to request driver data.
func TestRequestDecoderKernelRules(t *testing.T) {
	expect := func(name string, err error, errno unix.Errno) {
		t.Helper()
		if errno == 0 {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			return
		}
		if !errors.Is(err, errno) {
			t.Errorf("%s: %v, want %v", name, err, errno)
		}
	}
	_, err := DecodeAllocUcontextReq(make([]byte, 8))
	expect("ucontext v0", err, 0)
	_, err = DecodeAllocUcontextReq(make([]byte, 12))
	expect("ucontext 12 bytes", err, unix.EINVAL)
	_, err = DecodeAllocUcontextReq(make([]byte, 16))
	expect("ucontext v2 without max_cqe_version", err, 0)
	b := make([]byte, 32)
	b[20] = 1
	_, err = DecodeAllocUcontextReq(b)
	expect("ucontext reserved2", err, unix.EOPNOTSUPP)
	b = make([]byte, CreateCQSize)
	b[27] = 1
	_, err = DecodeCreateCQ(b)
	expect("create_cq reserved0", err, unix.EINVAL)
	b = make([]byte, 64)
	_, err = DecodeCreateQP(b)
	expect("create_qp with cleared tail", err, 0)
	b[60] = 1
	_, err = DecodeCreateQP(b)
	expect("create_qp with uncleared tail", err, unix.EINVAL)
	_, err = DecodeCreateQP(make([]byte, 47))
	expect("create_qp without ece_options", err, unix.EINVAL)
}
