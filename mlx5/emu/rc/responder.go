package rc

import "github.com/shift-rdma/shift/mlx5/emu/roce"

// The responder side: PSN checking, duplicate detection, SEND placement into posted receives,
// WRITE/READ/atomic execution against host memory, ACKs and NAKs.

// ackCreditInvalid is the AETH credit field meaning "no end-to-end credit information", which a
// responder without credit flow control sends.
const ackCreditInvalid = 0x1f

func (q *QP) sendAckLocked(syndrome uint8, psn uint32) {
	p := q.newPacket(roce.Acknowledge, psn)
	p.AETH = roce.AETH{Syndrome: syndrome, MSN: q.msn & psnMask}
	q.transmit(p)
}

// responderErrorLocked NAKs the request at psn with code and moves the QP to ERR, as the IBA
// requires of an RC responder after an invalid request or a remote access error.
func (q *QP) responderErrorLocked(code uint8, psn uint32, cause Status) {
	q.sendAckLocked(roce.AETHNak|code, psn)
	q.enterErrorLocked(StatusWRFlushErr, cause, true)
}

func (q *QP) invalidRequestLocked(psn uint32) {
	q.responderErrorLocked(roce.NakInvalidRequest, psn, StatusLocQPOpErr)
}

// rnrNAKLocked answers a request that needs a receive when none is posted. The rest of the
// message follows the NAKed packet; like the packets after a sequence error they are dropped
// without another NAK until the requester resends from the NAKed PSN.
func (q *QP) rnrNAKLocked(psn uint32) {
	q.stats.RNRNAKsSent++
	q.nakSent = true
	q.sendAckLocked(roce.AETHRNRNak|q.cfg.MinRNRTimer&0x1f, psn)
}

// responderRecvLocked handles an incoming request packet.
func (q *QP) responderRecvLocked(p *roce.Packet) {
	if p.BTH.Opcode > roce.FetchAdd {
		return // not an RC opcode: dropped, as a NIC drops malformed packets
	}
	psn := p.BTH.PSN & psnMask
	if d := psnDiff(psn, q.ePSN); d > 0 {
		// A gap: NAK once per episode, then drop until the expected PSN arrives.
		if !q.nakSent {
			q.nakSent = true
			q.stats.SeqNAKsSent++
			q.sendAckLocked(roce.AETHNak|roce.NakPSNSequenceError, q.ePSN)
		}
		return
	} else if d < 0 {
		q.duplicateLocked(p, psn)
		return
	}
	q.nakSent = false
	switch op := p.BTH.Opcode; {
	case op <= roce.SendOnlyWithImmediate:
		q.recvSendLocked(p, psn)
	case op <= roce.WriteOnlyWithImmediate:
		q.recvWriteLocked(p, psn)
	case op == roce.ReadRequest:
		if q.inSend || q.inWrite || q.cfg.RemoteAccess&AccessRemoteRead == 0 {
			q.invalidRequestLocked(psn)
			return
		}
		if buf, ok := q.readTargetLocked(p, psn); ok {
			q.msn = psnAdd(q.msn, 1)
			q.ePSN = psnAdd(psn, packets(int(p.RETH.DMALen), q.mtu))
			q.sendReadResponsesLocked(psn, buf, int(p.RETH.DMALen))
		}
	case op == roce.CompareSwap || op == roce.FetchAdd:
		q.recvAtomicLocked(p, psn)
	default:
		// Response opcodes never reach here; anything else is not a request.
		q.invalidRequestLocked(psn)
	}
}

// payloadOK checks the IBA packet length rules: FIRST and MIDDLE packets carry exactly one
// MTU, LAST and ONLY at most one.
func (q *QP) payloadOK(p *roce.Packet, last bool) bool {
	if last {
		return len(p.Payload) <= q.mtu
	}
	return len(p.Payload) == q.mtu
}

func (q *QP) recvSendLocked(p *roce.Packet, psn uint32) {
	op := p.BTH.Opcode
	first := op == roce.SendFirst || op == roce.SendOnly || op == roce.SendOnlyWithImmediate
	last := op != roce.SendFirst && op != roce.SendMiddle
	if first {
		if q.inSend || q.inWrite {
			q.invalidRequestLocked(psn)
			return
		}
	} else if !q.inSend {
		q.invalidRequestLocked(psn)
		return
	}
	if !q.payloadOK(p, last) {
		q.invalidRequestLocked(psn)
		return
	}
	if first {
		r, ok := q.host.PopRecv()
		if !ok {
			q.rnrNAKLocked(psn)
			return
		}
		q.recv, q.recvOff, q.inSend = r, 0, true
	}
	if !scatterAt(q.recv.Scatter, q.recvOff, p.Payload) {
		q.pending = append(q.pending, event{kind: evRecv, rc: RecvCompletion{
			Index: q.recv.Index, Status: StatusLocLenErr, SrcQPN: q.cfg.RemoteQPN,
		}})
		q.inSend = false
		q.recv = Recv{}
		q.responderErrorLocked(roce.NakInvalidRequest, psn, StatusLocLenErr)
		return
	}
	q.recvOff += len(p.Payload)
	q.ePSN = psnAdd(psn, 1)
	if last {
		q.msn = psnAdd(q.msn, 1)
		imm := op == roce.SendLastWithImmediate || op == roce.SendOnlyWithImmediate
		c := RecvCompletion{
			Index: q.recv.Index, Op: OpSend, Status: StatusSuccess, ByteLen: uint32(q.recvOff),
			SrcQPN: q.cfg.RemoteQPN, Solicited: p.BTH.SE,
		}
		if imm {
			c.Op, c.Imm, c.HasImm = OpSendImm, p.Imm, true
		}
		q.pending = append(q.pending, event{kind: evRecv, rc: c})
		q.inSend = false
		q.recv = Recv{}
	}
	if p.BTH.AckReq {
		q.sendAckLocked(roce.AETHAck|ackCreditInvalid, psn)
	}
}

func (q *QP) recvWriteLocked(p *roce.Packet, psn uint32) {
	op := p.BTH.Opcode
	first := op == roce.WriteFirst || op == roce.WriteOnly || op == roce.WriteOnlyWithImmediate
	last := op != roce.WriteFirst && op != roce.WriteMiddle
	imm := op == roce.WriteLastWithImmediate || op == roce.WriteOnlyWithImmediate
	if first {
		if q.inSend || q.inWrite || q.cfg.RemoteAccess&AccessRemoteWrite == 0 {
			q.invalidRequestLocked(psn)
			return
		}
	} else if !q.inWrite {
		q.invalidRequestLocked(psn)
		return
	}
	if !q.payloadOK(p, last) {
		q.invalidRequestLocked(psn)
		return
	}
	var buf []byte
	if first {
		// The IBA checks the rkey only for a non-zero DMA length.
		if n := int(p.RETH.DMALen); n > 0 {
			b, err := q.host.RemoteMemory(p.RETH.RKey, p.RETH.VA, n, AccessRemoteWrite)
			if err != nil || len(b) != n {
				q.responderErrorLocked(roce.NakRemoteAccessError, psn, StatusLocAccessErr)
				return
			}
			buf = b
		}
	} else {
		buf = q.wbuf
	}
	off := 0
	if !first {
		off = q.woff
	}
	if off+len(p.Payload) > len(buf) || (last && off+len(p.Payload) != len(buf)) {
		q.invalidRequestLocked(psn)
		return
	}
	var r Recv
	if imm {
		// Checked before any byte lands, so an RNR-NAKed packet is simply sent again.
		var ok bool
		if r, ok = q.host.PopRecv(); !ok {
			q.rnrNAKLocked(psn)
			if first {
				q.inWrite = false
			}
			return
		}
	}
	copy(buf[off:], p.Payload)
	q.ePSN = psnAdd(psn, 1)
	if last {
		q.msn = psnAdd(q.msn, 1)
		q.inWrite, q.wbuf, q.woff = false, nil, 0
		if imm {
			q.pending = append(q.pending, event{kind: evRecv, rc: RecvCompletion{
				Index: r.Index, Op: OpWriteImm, Status: StatusSuccess, ByteLen: uint32(len(buf)),
				Imm: p.Imm, HasImm: true, SrcQPN: q.cfg.RemoteQPN, Solicited: p.BTH.SE,
			}})
		}
	} else {
		q.inWrite, q.wbuf, q.woff = true, buf, off+len(p.Payload)
	}
	if p.BTH.AckReq {
		q.sendAckLocked(roce.AETHAck|ackCreditInvalid, psn)
	}
}

// readTargetLocked checks a READ request's rkey and range and returns the bytes to read; on
// failure it NAKs and reports false.
func (q *QP) readTargetLocked(p *roce.Packet, psn uint32) ([]byte, bool) {
	n := int(p.RETH.DMALen)
	if n == 0 {
		return nil, true
	}
	b, err := q.host.RemoteMemory(p.RETH.RKey, p.RETH.VA, n, AccessRemoteRead)
	if err != nil || len(b) != n {
		q.responderErrorLocked(roce.NakRemoteAccessError, psn, StatusLocAccessErr)
		return nil, false
	}
	return b, true
}

// sendReadResponsesLocked segments total bytes of buf into READ response packets numbered
// from the request's PSN.
func (q *QP) sendReadResponsesLocked(psn uint32, buf []byte, total int) {
	n := packets(total, q.mtu)
	for k := uint32(0); k < n; k++ {
		var op roce.Opcode
		switch position(k, n) {
		case 0:
			op = roce.ReadResponseOnly
		case 1:
			op = roce.ReadResponseFirst
		case 2:
			op = roce.ReadResponseMiddle
		default:
			op = roce.ReadResponseLast
		}
		rp := q.newPacket(op, psnAdd(psn, k))
		if rp.Has&roce.HasAETH != 0 {
			rp.AETH = roce.AETH{Syndrome: roce.AETHAck | ackCreditInvalid, MSN: q.msn & psnMask}
		}
		off := int(k) * q.mtu
		m := min(q.mtu, total-off)
		if m > 0 {
			rp.Payload = make([]byte, m)
			copy(rp.Payload, buf[off:off+m])
		}
		rp.BTH.PadCount = padCount(m)
		q.transmit(rp)
	}
}

func (q *QP) recvAtomicLocked(p *roce.Packet, psn uint32) {
	if q.inSend || q.inWrite || q.cfg.RemoteAccess&AccessRemoteAtomic == 0 || p.AtomicETH.VA%8 != 0 {
		q.invalidRequestLocked(psn)
		return
	}
	b, err := q.host.RemoteMemory(p.AtomicETH.RKey, p.AtomicETH.VA, 8, AccessRemoteAtomic)
	if err != nil || len(b) != 8 {
		q.responderErrorLocked(roce.NakRemoteAccessError, psn, StatusLocAccessErr)
		return
	}
	op := OpFetchAdd
	if p.BTH.Opcode == roce.CompareSwap {
		op = OpCompareSwap
	}
	orig := atomic64(b, op, p.AtomicETH.Compare, p.AtomicETH.SwapOrAdd)
	q.atomics[q.atomicIx] = atomicResult{psn: psn, orig: orig, valid: true}
	q.atomicIx = (q.atomicIx + 1) % len(q.atomics)
	q.msn = psnAdd(q.msn, 1)
	q.ePSN = psnAdd(psn, 1)
	q.sendAtomicAckLocked(psn, orig)
}

func (q *QP) sendAtomicAckLocked(psn uint32, orig uint64) {
	rp := q.newPacket(roce.AtomicAcknowledge, psn)
	rp.AETH = roce.AETH{Syndrome: roce.AETHAck | ackCreditInvalid, MSN: q.msn & psnMask}
	rp.AtomicAck = orig
	q.transmit(rp)
}

// duplicateLocked answers a request whose PSN is behind the expected one: SEND/WRITE are
// acknowledged again without being executed, READs are executed again (they are idempotent),
// atomics replay their saved result (IBA 9.7.5.1.6, C9-105..C9-108).
func (q *QP) duplicateLocked(p *roce.Packet, psn uint32) {
	q.stats.Duplicates++
	switch p.BTH.Opcode {
	case roce.ReadRequest:
		if q.cfg.RemoteAccess&AccessRemoteRead == 0 {
			return
		}
		if buf, ok := q.readTargetLocked(p, psn); ok {
			q.sendReadResponsesLocked(psn, buf, int(p.RETH.DMALen))
		}
	case roce.CompareSwap, roce.FetchAdd:
		for _, a := range q.atomics {
			if a.valid && a.psn == psn {
				q.stats.AtomicReplays++
				q.sendAtomicAckLocked(psn, a.orig)
				return
			}
		}
		// Too old to replay: dropped, as the IBA allows; the requester times out.
	default:
		if p.BTH.AckReq {
			q.sendAckLocked(roce.AETHAck|ackCreditInvalid, psnAdd(q.ePSN, psnMask))
		}
	}
}
