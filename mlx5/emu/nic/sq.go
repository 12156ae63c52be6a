package nic

import (
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

// localCompletion is a WQE the device completes by itself rather than through the RC engine:
// a NOP, a WQE that fails validation, or a WQE flushed because the QP is in ERR.
type localCompletion struct {
	index    uint16
	opcode   mlx5.Opcode
	status   mlx5.WCStatus
	signaled bool
	receive  bool
}

// maxMessage is the largest message an RC WQE may describe (2^31 bytes, the IBA limit and
// ConnectX's max_msg_sz).
const maxMessage = 1 << 31

// rung is called by the watcher when a send doorbell for this QP was consumed.
func (q *QP) rung() { q.process() }

// process executes the send queue from the device's consumer index up to the send counter of
// the doorbell record. It runs on the watcher goroutine only (doorbells and kicks), so WQEs
// reach the engine in doorbell order. A QP in INIT or RTR keeps its rung WQEs until it moves
// to RTS, as the IBA requires; a QP in RESET ignores doorbells. It reports whether the QP
// could run more right away: WQEs advertised in the record after it looked, with nothing
// (a stall on earlier WRs, the state) holding them back.
func (q *QP) process() (more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return false
	}
	q.recvErrorLocked()
	switch q.State() {
	case QPSReset:
		return false
	case QPSInit, QPSRTR:
		q.dbPending = true
		return false
	}
	defer func() {
		more = !q.stalled.Load() && q.dbrec.sendCounter() != q.sqCI
	}()
	pi := q.dbrec.sendCounter()
	for q.sqCI != pi {
		pending := pi - q.sqCI
		wr := &q.wr // the engine copies it
		var lc localCompletion
		bbs, local := q.parse(wr, &lc, pending)
		if !local {
			q.dev.stats.wqesExecuted.Add(1)
			// In ERR the engine completes the WR at once with a flush error, after the WRs
			// it still holds, which keeps the send queue's completion order.
			q.outstanding.Add(1)
			q.sqCI += bbs
			if err := q.tr.Post(wr); err != nil {
				// The engine refused the WR (it was closed or reset under us): complete
				// it as flushed so software's ring accounting still moves.
				q.outstanding.Add(-1)
				q.localCompleteLocked(&localCompletion{index: wr.Index, opcode: sendOpcode(wr.Op), status: mlx5.WCWRFlushErr})
			}
			continue
		}
		// Completed by the device itself: keep completions in send queue order by waiting
		// for the WRs the engine still holds.
		// stalled is published before outstanding is read, and SendCompleted decrements
		// outstanding before it reads stalled: one of the two sees the other, so the last
		// completion cannot miss the stall.
		q.stalled.Store(true)
		if q.outstanding.Load() > 0 {
			return
		}
		q.stalled.Store(false)
		if q.State() == QPSErr {
			lc.status = mlx5.WCWRFlushErr
		}
		q.sqCI += bbs
		q.dev.stats.wqesExecuted.Add(1)
		q.localCompleteLocked(&lc)
		if lc.status != mlx5.WCSuccess && q.State() != QPSErr {
			q.enterErrorLocked(lc.status)
		}
	}
	return false
}

// parse reads the WQE at the consumer index. It fills wr and returns local=false for a WQE
// the engine executes, or fills lc and returns local=true for one the device completes itself
// (NOP, or a validation failure with the syndrome the hardware reports). bbs is the number of
// basic blocks the WQE occupies.
func (q *QP) parse(wr *rc.WorkRequest, lc *localCompletion, pending uint16) (bbs uint16, local bool) {
	w := &q.wqe
	err := q.sqRing.parse(uint32(q.sqCI), w)
	*lc = localCompletion{index: q.sqCI, opcode: w.ctrl.opcode, signaled: w.ctrl.signaled(), status: mlx5.WCLocQPOpErr}
	if pending > q.sqBBs {
		// Software advertised more than the ring holds.
		return 1, true
	}
	if err != nil {
		// Malformed (bad DS, unknown opcode, segments that do not fit): a local QP
		// operation error, as the hardware reports it.
		if w.bbs == 0 {
			return 1, true
		}
		return min(uint16(w.bbs), pending), true
	}
	bbs = uint16(w.bbs)
	if bbs > pending {
		// The doorbell record does not cover the whole WQE: software rang a partial WQE.
		return pending, true
	}
	if w.ctrl.qpn != q.qpn || w.ctrl.opcode == mlx5.OpcodeSendInval {
		return bbs, true
	}
	if w.ctrl.opcode == mlx5.OpcodeNOP {
		lc.status = mlx5.WCSuccess
		return bbs, true
	}
	*wr = rc.WorkRequest{
		Index:      q.sqCI,
		Op:         rcOp(w.ctrl.opcode),
		Imm:        w.ctrl.imm,
		RemoteAddr: w.raddr,
		RKey:       w.rkey,
		SwapAdd:    w.swapAdd,
		Compare:    w.compare,
		Signaled:   w.ctrl.signaled(),
		Fence:      w.ctrl.fenced(),
		Solicited:  w.ctrl.solicited(),
	}
	scatter := w.ctrl.opcode == mlx5.OpcodeRDMARead || w.hasAtomic
	if w.inline {
		if scatter || q.maxInline > 0 && w.inlineLen > q.maxInline {
			return bbs, true
		}
		// Inline data is copied now, as the hardware takes it with the WQE: software may
		// reuse the slot once a later completion frees it.
		b := make([]byte, w.inlineLen)
		q.sqRing.copyInline(w, b)
		wr.Local = [][]byte{b}
		return bbs, false
	}
	if q.maxSendSGE > 0 && w.numData > q.maxSendSGE {
		return bbs, true
	}
	var total uint64
	wr.Local = q.localsFor(w.numData)
	for i := 0; i < w.numData; i++ {
		d := &w.data[i]
		l := d.byteCount
		if l == 0 {
			l = maxMessage // the PRM encodes 2 GiB as a zero byte count
		}
		b, ok := q.dev.localAccess(q.pd, d.lkey, d.addr, l, scatter)
		if !ok {
			lc.status = mlx5.WCLocProtErr
			return bbs, true
		}
		wr.Local = append(wr.Local, b)
		total += uint64(l)
	}
	if total > maxMessage {
		lc.status = mlx5.WCLocLenErr
		return bbs, true
	}
	if w.hasAtomic && (len(wr.Local) != 1 || len(wr.Local[0]) != mlx5.AtomicSize) {
		return bbs, true
	}
	return bbs, false
}

// wqeOps pairs every send WQE opcode the engine executes with its operation; the two
// mappings below read it in either direction.
var wqeOps = [...]struct {
	wqe mlx5.Opcode
	op  rc.Op
}{
	{mlx5.OpcodeSend, rc.OpSend},
	{mlx5.OpcodeSendImm, rc.OpSendImm},
	{mlx5.OpcodeRDMAWrite, rc.OpWrite},
	{mlx5.OpcodeRDMAWriteImm, rc.OpWriteImm},
	{mlx5.OpcodeRDMARead, rc.OpRead},
	{mlx5.OpcodeAtomicCS, rc.OpCompareSwap},
	{mlx5.OpcodeAtomicFA, rc.OpFetchAdd},
}

// rcOp maps a send WQE opcode to the engine's operation (0 for one it does not execute).
func rcOp(o mlx5.Opcode) rc.Op {
	for _, m := range wqeOps {
		if m.wqe == o {
			return m.op
		}
	}
	return 0
}

// sendOpcode maps the engine's operation back to the WQE opcode a requester CQE reports.
func sendOpcode(o rc.Op) mlx5.Opcode {
	for _, m := range wqeOps {
		if m.op == o {
			return m.wqe
		}
	}
	return mlx5.OpcodeNOP
}

// localCompleteLocked writes the CQE of a device-completed WQE: always for an error, for a
// success only when the WQE asked for one.
func (q *QP) localCompleteLocked(lc *localCompletion) {
	if lc.status == mlx5.WCSuccess && !lc.signaled {
		return
	}
	q.writeCQE(lc.receive, lc.opcode, lc.index, lc.status, 0)
}

// enterErrorLocked moves the QP to ERR on a device-detected error: the engine flushes what it
// holds, posted receives are flushed, and the kernel is told.
func (q *QP) enterErrorLocked(status mlx5.WCStatus) {
	q.state.Store(uint32(QPSErr))
	_ = q.tr.Modify(rc.StateError, rc.Config{LocalQPN: q.qpn, Clock: q.dev.clk})
	q.dev.watchErr(q)
	q.tr.FlushRecv()
	if q.onError != nil {
		q.onError(status)
	}
}

// localsFor returns the gather/scatter list storage of the WQE at the consumer index. The
// engine keeps the list until the WR completes, and software reuses a send queue slot only
// after the WQE in it (or a later one) completed, so each slot's storage is reused in turn
// instead of allocating one list per WQE.
func (q *QP) localsFor(n int) [][]byte {
	slot := int(q.sqCI & (q.sqBBs - 1))
	if q.locals == nil {
		q.locals = make([][][]byte, q.sqBBs)
	}
	l := q.locals[slot]
	if cap(l) < n {
		l = make([][]byte, 0, max(n, 4))
	}
	clear(l[:cap(l)])
	l = l[:0]
	q.locals[slot] = l
	return l
}
