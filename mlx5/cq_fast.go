package mlx5

import (
	"encoding/binary"
	"sync/atomic"
)

// FastWC is the part of a work completion a verbs poll_cq reports for an RC QP, read straight
// from the CQE bytes by CQ.PollWC: the same values CQE64.Completion computes for these fields
// (cq_fast_test.go compares them for random CQEs), without decoding the rest of the CQE.
type FastWC struct {
	Status     WCStatus
	Opcode     WCOpcode
	Flags      WCFlags
	ByteLen    uint32
	Imm        uint32 // immediate (big-endian value) or invalidated rkey, per Flags
	QPN        uint32
	SrcQP      uint32
	SL         uint8
	VendorErr  uint8
	WQECounter uint16
	// Receive is true for responder CQEs (and RESP_ERR), which consume receive WQEs.
	Receive bool
}

// PollWC is Poll followed by CQE64.Completion for the fields of FastWC: it returns false when
// the next entry still belongs to hardware; otherwise it fills w from the entry and advances
// the consumer counter. The doorbell record is not updated (call UpdateCI after a batch).
func (q *CQ) PollWC(w *FastWC) bool {
	o := int(q.ci&(q.ncqe-1))*q.cqeSize + q.cqeSize - CQE64Size
	b := q.buf[o : o+CQE64Size : o+CQE64Size]
	// The word holding wqe_counter, signature and op_own, loaded atomically as in CQ.ready.
	t := atomic.LoadUint32(at32(b, cqeOffWQECounter))
	var tb [4]byte
	ne.PutUint32(tb[:], t)
	if opOwn := tb[3]; opOwn>>4 == CQEInvalid || (opOwn&CQEOwnerMask != 0) != (q.ci&q.ncqe != 0) {
		return false
	}
	q.ci++
	parseWC(b, tb, w)
	return true
}

// parseWC fills w from the CQE64 b whose last word (wqe_counter, signature, op_own, in memory
// order) is tb.
func parseWC(b []byte, tb [4]byte, w *FastWC) {
	opOwn := tb[3]
	// udma_from_device_barrier between the ownership check and the reads of the entry.
	fromDeviceAfterAtomicLoad()
	sop := binary.BigEndian.Uint32(b[cqeOffSopDropQPN:])
	*w = FastWC{QPN: sop & qpnMask, WQECounter: binary.BigEndian.Uint16(tb[0:2])}
	switch op := opOwn >> 4; op {
	case CQEReq:
		opc, fl, lf, _ := RequesterOpcode(Opcode(sop >> 24))
		w.Opcode, w.Flags = opc, fl
		switch lf {
		case ReqLenByteCnt:
			w.ByteLen = binary.BigEndian.Uint32(b[cqeOffByteCnt:])
		case ReqLenAtomic:
			w.ByteLen = AtomicSize
		}
	case CQERespWrImm, CQERespSend, CQERespSendImm, CQERespSendInv:
		opc, fl, _ := ResponderOpcode(op)
		w.Opcode, w.Receive = opc, true
		w.ByteLen = binary.BigEndian.Uint32(b[cqeOffByteCnt:])
		if fl&(WCFlagWithImm|WCFlagWithInv) != 0 {
			w.Imm = binary.BigEndian.Uint32(b[cqeOffImmInvalPKey:])
		}
		fr := binary.BigEndian.Uint32(b[cqeOffFlagsRQPN:])
		w.SrcQP = fr & qpnMask
		w.SL = uint8(fr>>24) & 0xf
		if (fr>>28)&3 != 0 {
			fl |= WCFlagGRH
		}
		w.Flags = fl
	case CQEReqErr, CQERespErr:
		w.Status = StatusFromSyndrome(b[errOffSyndrome])
		w.VendorErr = b[errOffVendorSynd]
		w.Receive = op == CQERespErr
	default:
		w.Status = WCGeneralErr
	}
}

// Ready reports whether the next entry belongs to software, as PollWC's check does, without
// consuming it. It is small enough to inline, so a caller polling an empty CQ makes no call.
func (q *CQ) Ready() bool {
	o := int(q.ci&(q.ncqe-1))*q.cqeSize + q.cqeSize - 4
	opOwn := uint8(atomic.LoadUint32(at32(q.buf, o)) >> opOwnShift)
	return opOwn>>4 != CQEInvalid && (opOwn&CQEOwnerMask != 0) == (q.ci&q.ncqe != 0)
}
