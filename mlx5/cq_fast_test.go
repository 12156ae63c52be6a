package mlx5

import "testing"

// TestPollWCMatchesCompletion fills two CQs (64- and 128-byte entries) with random bytes whose
// op_own carries every opcode and both owner values, polls one with Poll + CQE64.Completion and
// the other with PollWC over many passes of the ring, and requires the same ready/not-ready
// answers, the same consumer index and the same values in every FastWC field.
func TestPollWCMatchesCompletion(t *testing.T) {
	if (opOwnShift == 24) != nativeLittle {
		t.Fatalf("opOwnShift %d on a little-endian=%v machine", opOwnShift, nativeLittle)
	}
	r := fastSeeded(t)
	for _, size := range []int{64, 128} {
		const n = 8
		a, err := NewCQ(fastMapped(t, n*size), n, size)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewCQ(fastMapped(t, n*size), n, size)
		if err != nil {
			t.Fatal(err)
		}
		start := uint32(r.IntN(1 << 20))
		a.SetConsumerIndex(start)
		b.SetConsumerIndex(start)
		var cqe CQE64
		var fw FastWC
		ready := 0
		for round := 0; round < 20000; round++ {
			for i := range a.buf {
				a.buf[i] = byte(r.Uint32())
			}
			e := a.cqe64(a.ci)
			opc := uint8(r.IntN(16))
			if r.IntN(3) == 0 { // mostly the opcodes an RC QP sees
				opc = []uint8{CQEReq, CQERespWrImm, CQERespSend, CQERespSendImm, CQERespSendInv, CQEReqErr, CQERespErr}[r.IntN(7)]
			}
			owner := a.ownerFor(a.ci)
			if r.IntN(4) == 0 {
				owner ^= 1
			}
			e[cqeOffOpOwn] = opc<<4 | e[cqeOffOpOwn]&0xe | owner
			if r.IntN(4) == 0 { // requester send opcodes
				e[cqeOffSopDropQPN] = []uint8{uint8(OpcodeRDMAWrite), uint8(OpcodeRDMAWriteImm), uint8(OpcodeSend),
					uint8(OpcodeSendImm), uint8(OpcodeSendInval), uint8(OpcodeRDMARead), uint8(OpcodeAtomicCS),
					uint8(OpcodeAtomicFA), uint8(OpcodeNOP)}[r.IntN(9)]
			}
			if r.IntN(3) == 0 { // mostly known syndromes
				e[errOffSyndrome] = []uint8{SyndromeLocalLengthErr, SyndromeWRFlushErr, SyndromeRemoteAccessErr,
					SyndromeTransportRetryExc, SyndromeRNRRetryExc}[r.IntN(5)]
			}
			copy(b.buf, a.buf)
			if b.Ready() != a.ready(a.ci) {
				t.Fatalf("size %d round %d: Ready %v, ready %v (op_own %#x)", size, round, b.Ready(), a.ready(a.ci), e[cqeOffOpOwn])
			}
			okA := a.Poll(&cqe)
			okB := b.PollWC(&fw)
			if okA != okB || a.ci != b.ci {
				t.Fatalf("size %d round %d: Poll %v ci %d, PollWC %v ci %d (op_own %#x)", size, round, okA, a.ci, okB, b.ci, e[cqeOffOpOwn])
			}
			if !okA {
				continue
			}
			ready++
			w := cqe.Completion()
			want := FastWC{Status: w.Status, Opcode: w.Opcode, Flags: w.Flags, ByteLen: w.ByteLen, Imm: w.Imm,
				QPN: w.QPN, SrcQP: w.SrcQP, SL: w.SL, VendorErr: w.VendorErr, WQECounter: w.WQECounter, Receive: w.Receive}
			if fw != want {
				t.Fatalf("size %d round %d: CQE %+v:\nPollWC     %+v\nCompletion %+v", size, round, cqe, fw, want)
			}
		}
		if ready < 1000 {
			t.Fatalf("size %d: only %d ready CQEs compared", size, ready)
		}
	}
}
