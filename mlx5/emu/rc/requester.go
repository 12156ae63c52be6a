package rc

import (
	"encoding/binary"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// The requester side: transmission of posted WRs, ACK/NAK and response processing, the local
// ACK timer and go-back-N retransmission.

func padCount(n int) uint8 { return uint8(-n & 3) }

// pumpLocked transmits packets of posted WRs, in order, while the window allows. A WR that
// needs the READ/atomic credit or carries a fence waits here, and so does everything after it.
func (q *QP) pumpLocked() {
	if q.State() != StateRTS || q.rnrWait {
		return
	}
	maxRD := int(q.cfg.MaxRDAtomic)
	if maxRD == 0 {
		maxRD = 1
	}
	for q.cur < len(q.sq) && psnDiff(q.nextPSN, q.una) < maxInflight {
		w := &q.sq[q.cur]
		ra := w.wr.Op.isReadAtomic()
		if !w.started {
			if w.wr.Fence && q.rdOut > 0 {
				return
			}
			if ra && q.rdOut >= maxRD {
				return
			}
			w.firstPSN = q.nextPSN
			w.started = true
			if ra {
				q.rdOut++
			}
		}
		psn := psnAdd(w.firstPSN, q.curPkt)
		if !q.outstandingLocked() && q.timeout != 0 {
			// The first packet after an idle period: its ACK timeout starts now, whatever
			// deadline a still-pending timer was left with.
			q.deadline = q.clk.Now().Add(q.timeout)
		}
		switch {
		case w.wr.Op == OpRead:
			q.sendReadRequest(w, q.curPkt)
			q.nextPSN = psnAdd(w.firstPSN, w.npkts)
			q.cur++
			q.curPkt = 0
		case ra:
			q.sendAtomicRequest(w)
			q.nextPSN = psnAdd(psn, 1)
			q.cur++
			q.curPkt = 0
		default:
			q.sendDataPacket(w, q.curPkt)
			q.nextPSN = psnAdd(psn, 1)
			q.curPkt++
			if q.curPkt == w.npkts {
				q.cur++
				q.curPkt = 0
			}
		}
		if psnLT(q.sendHigh, q.nextPSN) {
			q.sendHigh = q.nextPSN
		}
		q.armAckTimerLocked()
	}
}

var sendOps = [2][4]roce.Opcode{
	{roce.SendOnly, roce.SendFirst, roce.SendMiddle, roce.SendLast},
	{roce.SendOnlyWithImmediate, roce.SendFirst, roce.SendMiddle, roce.SendLastWithImmediate},
}

var writeOps = [2][4]roce.Opcode{
	{roce.WriteOnly, roce.WriteFirst, roce.WriteMiddle, roce.WriteLast},
	{roce.WriteOnlyWithImmediate, roce.WriteFirst, roce.WriteMiddle, roce.WriteLastWithImmediate},
}

// position is 0 only, 1 first, 2 middle, 3 last.
func position(k, n uint32) int {
	switch {
	case n == 1:
		return 0
	case k == 0:
		return 1
	case k == n-1:
		return 3
	}
	return 2
}

// sendDataPacket transmits packet k of a SEND or WRITE.
func (q *QP) sendDataPacket(w *sendWR, k uint32) {
	off := int(k) * q.mtu
	n := min(q.mtu, w.length-off)
	pos := position(k, w.npkts)
	last := pos == 0 || pos == 3
	imm := 0
	if w.wr.Op == OpSendImm || w.wr.Op == OpWriteImm {
		imm = 1
	}
	var op roce.Opcode
	if w.wr.Op == OpSend || w.wr.Op == OpSendImm {
		op = sendOps[imm][pos]
	} else {
		op = writeOps[imm][pos]
	}
	p := q.newPacket(op, psnAdd(w.firstPSN, k))
	if p.Has&roce.HasRETH != 0 {
		p.RETH = roce.RETH{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: uint32(w.length)}
	}
	if p.Has&roce.HasImm != 0 {
		p.Imm = w.wr.Imm
	}
	p.BTH.SE = last && w.wr.Solicited
	p.BTH.AckReq = last || (k+1)%ackEvery == 0
	if n > 0 {
		p.Payload = make([]byte, n)
		gatherAt(p.Payload, w.wr.Local, off)
	}
	p.BTH.PadCount = padCount(n)
	q.transmit(p)
}

// sendReadRequest transmits a READ request for the WR's response packets k and later; a
// retransmitted READ asks only for what has not arrived (IBA 9.7.5.1.4 allows either).
func (q *QP) sendReadRequest(w *sendWR, k uint32) {
	off := int(k) * q.mtu
	p := q.newPacket(roce.ReadRequest, psnAdd(w.firstPSN, k))
	p.RETH = roce.RETH{VA: w.wr.RemoteAddr + uint64(off), RKey: w.wr.RKey, DMALen: uint32(w.length - off)}
	p.BTH.AckReq = true
	q.transmit(p)
}

func (q *QP) sendAtomicRequest(w *sendWR) {
	op := roce.FetchAdd
	if w.wr.Op == OpCompareSwap {
		op = roce.CompareSwap
	}
	p := q.newPacket(op, w.firstPSN)
	p.AtomicETH = roce.AtomicETH{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapOrAdd: w.wr.SwapAdd, Compare: w.wr.Compare}
	p.BTH.AckReq = true
	q.transmit(p)
}

// armAckTimerLocked starts the local ACK timer if it is not running. The timer is not re-armed
// on every ACK: progress only moves the deadline, and an expiry before the deadline re-arms.
func (q *QP) armAckTimerLocked() {
	if q.timeout == 0 || q.ackTimer != nil {
		return
	}
	q.deadline = q.clk.Now().Add(q.timeout)
	gen := q.timerGen
	q.ackTimer = q.clk.AfterFunc(q.timeout, func() { q.onAckTimer(gen) })
}

func (q *QP) outstandingLocked() bool { return psnLT(q.una, q.sendHigh) }

func (q *QP) onAckTimer(gen uint64) {
	q.mu.Lock()
	if gen != q.timerGen || q.closed {
		q.mu.Unlock()
		return
	}
	q.ackTimer = nil
	if q.State() != StateRTS || q.rnrWait || !q.outstandingLocked() {
		q.mu.Unlock()
		return
	}
	if now := q.clk.Now(); now.Before(q.deadline) {
		q.ackTimer = q.clk.AfterFunc(q.deadline.Sub(now), func() { q.onAckTimer(gen) })
		q.mu.Unlock()
		return
	}
	q.stats.Timeouts++
	if q.retries == 0 {
		q.enterErrorLocked(StatusRetryExcErr, StatusRetryExcErr, true)
	} else {
		q.retries--
		q.retransmitLocked()
	}
	q.unlockAndDeliver()
}

func (q *QP) onRNRTimer(gen uint64) {
	q.mu.Lock()
	if gen != q.timerGen || q.closed {
		q.mu.Unlock()
		return
	}
	q.rnrTimer = nil
	if q.State() == StateRTS && q.rnrWait {
		q.rnrWait = false
		q.retransmitLocked()
	}
	q.unlockAndDeliver()
}

// retransmitLocked goes back to the oldest unacknowledged PSN and transmits again from there.
func (q *QP) retransmitLocked() {
	q.stats.Retransmits++
	psn := q.una
	i := q.head
	for ; i < len(q.sq); i++ {
		w := &q.sq[i]
		if !w.started {
			break
		}
		if psnLT(psn, psnAdd(w.firstPSN, w.npkts)) {
			break
		}
	}
	q.cur, q.curPkt = i, 0
	if i < len(q.sq) && q.sq[i].started {
		w := &q.sq[i]
		if d := psnDiff(psn, w.firstPSN); d > 0 {
			q.curPkt = uint32(d)
		} else {
			psn = w.firstPSN
		}
	}
	q.nextPSN = psn
	if q.timeout != 0 {
		q.deadline = q.clk.Now().Add(q.timeout)
	}
	q.pumpLocked()
}

// progressLocked records forward progress: the retry counters start over (IBA 9.7.5.2.8) and
// the ACK timer measures from now.
func (q *QP) progressLocked() {
	q.retries = q.cfg.RetryCnt
	q.rnrRetries = q.cfg.RNRRetry
	q.recovering = false
	if q.timeout != 0 {
		q.deadline = q.clk.Now().Add(q.timeout)
	}
}

// ackThroughLocked acknowledges every PSN before target. A READ or atomic whose responses have
// not all arrived stops the acknowledgement at its next expected response: if target goes
// beyond it, its responses were lost (an implicit NAK) and ackThroughLocked reports true.
func (q *QP) ackThroughLocked(target uint32) (implicitNAK bool) {
	if psnLT(q.sendHigh, target) {
		return false // acknowledges PSNs never sent: ignore
	}
	for i := q.head; i < len(q.sq); i++ {
		w := &q.sq[i]
		if !w.started {
			break
		}
		if w.wr.Op.isReadAtomic() && !w.done {
			if exp := psnAdd(w.firstPSN, w.recvd); psnLT(exp, target) {
				target, implicitNAK = exp, true
			}
			break
		}
	}
	if psnLT(q.una, target) {
		q.una = target
		q.progressLocked()
	}
	q.completeHeadLocked()
	return implicitNAK
}

// completeHeadLocked completes, in order, the WRs at the head that are done.
func (q *QP) completeHeadLocked() {
	for q.head < len(q.sq) {
		w := &q.sq[q.head]
		if !w.started {
			return
		}
		if w.wr.Op.isReadAtomic() {
			if !w.done {
				return
			}
		} else if !psnLE(psnAdd(w.firstPSN, w.npkts), q.una) {
			return
		}
		q.pushSend(w, StatusSuccess)
		q.sq[q.head] = sendWR{}
		q.head++
	}
}

// requesterRecvLocked handles ACKs, NAKs and responses.
func (q *QP) requesterRecvLocked(p *roce.Packet) {
	psn := p.BTH.PSN & psnMask
	switch p.BTH.Opcode {
	case roce.Acknowledge:
		q.ackPacketLocked(p, psn)
	case roce.AtomicAcknowledge:
		q.responseLocked(p, psn)
	default:
		q.responseLocked(p, psn)
	}
	if q.State() == StateRTS {
		q.pumpLocked()
	}
}

func (q *QP) ackPacketLocked(p *roce.Packet, psn uint32) {
	syn := p.AETH.Syndrome
	switch syn & 0x60 {
	case roce.AETHAck:
		if q.ackThroughLocked(psnAdd(psn, 1)) {
			q.goBackLocked()
		}
	case roce.AETHRNRNak:
		if psnLT(psn, q.una) || q.rnrWait {
			return // stale
		}
		q.stats.RNRNAKsReceived++
		q.ackThroughLocked(psn)
		if q.rnrRetries == 0 {
			q.enterErrorLocked(StatusRNRRetryExcErr, StatusRNRRetryExcErr, true)
			return
		}
		if q.cfg.RNRRetry != 7 {
			q.rnrRetries--
		}
		q.rnrWait = true
		gen := q.timerGen
		q.rnrTimer = q.clk.AfterFunc(RNRDelay(syn&0x1f), func() { q.onRNRTimer(gen) })
	case roce.AETHNak:
		if psnLT(psn, q.una) || (q.rnrWait && syn&0x1f == roce.NakPSNSequenceError) {
			return // stale, or a consequence of the RNR NAK being waited out
		}
		q.ackThroughLocked(psn)
		var st Status
		switch syn & 0x1f {
		case roce.NakPSNSequenceError:
			q.stats.SeqNAKsReceived++
			if q.retries == 0 {
				q.enterErrorLocked(StatusRetryExcErr, StatusRetryExcErr, true)
				return
			}
			q.retries--
			q.retransmitLocked()
			return
		case roce.NakRemoteAccessError:
			st = StatusRemAccessErr
		case roce.NakRemoteOperational:
			st = StatusRemOpErr
		default: // invalid request, invalid RD request, reserved codes
			st = StatusRemInvReqErr
		}
		q.enterErrorLocked(st, st, true)
	}
}

// goBackLocked retransmits from una once per loss episode: an out-of-order response or an
// implicit NAK starts it, progress ends it.
func (q *QP) goBackLocked() {
	if q.recovering {
		return
	}
	q.recovering = true
	q.retransmitLocked()
}

// responseLocked handles READ response and atomic ACK packets. A response implicitly
// acknowledges every request before it.
func (q *QP) responseLocked(p *roce.Packet, psn uint32) {
	if psnLT(psn, q.una) || !psnLT(psn, q.sendHigh) {
		return // duplicate or unsolicited
	}
	if q.ackThroughLocked(psn) || psn != q.una {
		q.goBackLocked()
		return
	}
	if q.head >= len(q.sq) {
		return
	}
	w := &q.sq[q.head]
	if !w.started || !w.wr.Op.isReadAtomic() || w.done {
		q.enterErrorLocked(StatusBadRespErr, StatusBadRespErr, true)
		return
	}
	k := uint32(psnDiff(psn, w.firstPSN))
	if p.BTH.Opcode == roce.AtomicAcknowledge {
		if !w.wr.Op.isAtomic() || p.Has&roce.HasAtomicAckETH == 0 {
			q.enterErrorLocked(StatusBadRespErr, StatusBadRespErr, true)
			return
		}
		var b [8]byte
		binary.NativeEndian.PutUint64(b[:], p.AtomicAck)
		scatterAt(w.wr.Local, 0, b[:])
	} else {
		if w.wr.Op != OpRead {
			q.enterErrorLocked(StatusBadRespErr, StatusBadRespErr, true)
			return
		}
		off := int(k) * q.mtu
		want := min(q.mtu, w.length-off)
		lastPkt := k == w.npkts-1
		isLast := p.BTH.Opcode == roce.ReadResponseLast || p.BTH.Opcode == roce.ReadResponseOnly
		if len(p.Payload) != want || lastPkt != isLast {
			q.enterErrorLocked(StatusBadRespErr, StatusBadRespErr, true)
			return
		}
		scatterAt(w.wr.Local, off, p.Payload)
	}
	w.recvd++
	q.una = psnAdd(psn, 1)
	q.progressLocked()
	if w.recvd == w.npkts {
		w.done = true
		q.rdOut--
	}
	q.completeHeadLocked()
}
