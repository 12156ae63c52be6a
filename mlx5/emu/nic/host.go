package nic

import (
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

// qpHost is what the device gives the RC engine of one QP (rc.Host): memory keys for remote
// access, the receive queue, and CQE writing for completions. Its methods never take q.mu, so
// the engine may call them while the device is inside Post or Modify.
type qpHost struct{ q *QP }

var _ rc.Host = (*qpHost)(nil)

// RemoteMemory checks an incoming request's rkey against the QP's protection domain, the
// region's range and its access rights.
func (h *qpHost) RemoteMemory(rkey uint32, va uint64, length int, access rc.Access) ([]byte, error) {
	return h.q.dev.remoteAccess(h.q.pd, rkey, va, length, access)
}

// PopRecv consumes the next posted receive WQE.
func (h *qpHost) PopRecv() (rc.Recv, bool) { return h.q.popRecv() }

// SendCompleted turns the engine's completion of a send WR into a CQE: every error, and
// successes of signaled WRs (an unsignaled WR produces no CQE unless it fails).
func (h *qpHost) SendCompleted(c rc.SendCompletion) {
	q := h.q
	st := mlx5.WCStatus(c.Status)
	if st != mlx5.WCSuccess || c.Signaled {
		q.writeCQE(false, sendOpcode(c.Op), c.Index, st, c.ByteLen)
	}
	if q.outstanding.Add(-1) <= 0 && q.stalled.Load() {
		q.dev.kick(q)
	}
}

// RecvCompleted writes a responder CQE for a consumed or flushed receive.
func (h *qpHost) RecvCompleted(c rc.RecvCompletion) {
	q := h.q
	st := mlx5.WCStatus(c.Status)
	e := mlx5.CQE64{
		SopDropQPN: q.qpn,
		WQECounter: c.Index,
	}
	if st != mlx5.WCSuccess {
		e.SetOpOwn(mlx5.CQERespErr, false, 0)
		e.Syndrome, e.VendorSyndrome = syndromeOf(st)
		q.rcq.push(&e, false)
		return
	}
	switch c.Op {
	case rc.OpSendImm:
		e.SetOpOwn(mlx5.CQERespSendImm, false, 0)
	case rc.OpWriteImm:
		e.SetOpOwn(mlx5.CQERespWrImm, false, 0)
	default:
		e.SetOpOwn(mlx5.CQERespSend, false, 0)
	}
	e.ByteCnt = c.ByteLen
	if c.HasImm {
		e.ImmInvalPKey = c.Imm
	}
	// RoCE: the GRH is always present (l3/grh bits 29:28 = 1), source QPN in 23:0.
	e.FlagsRQPN = 1<<28 | c.SrcQPN&0xffffff
	q.rcq.push(&e, c.Solicited)
}

// QPError records that the engine moved the QP to ERR by itself.
func (h *qpHost) QPError(status rc.Status) {
	q := h.q
	if QPState(q.state.Swap(uint32(QPSErr))) == QPSErr {
		return
	}
	q.dev.watchErr(q)
	q.tr.FlushRecv()
	if q.onError != nil {
		q.onError(mlx5.WCStatus(status))
	}
	if ev := asyncEventFor(mlx5.WCStatus(status)); ev != 0 && q.onEvent != nil {
		q.onEvent(ev)
	}
	q.dev.kick(q)
}

// writeCQE writes a requester (or, for device-flushed receives, responder) CQE.
func (q *QP) writeCQE(receive bool, op mlx5.Opcode, index uint16, st mlx5.WCStatus, byteLen uint32) {
	e := mlx5.CQE64{WQECounter: index}
	cq := q.scq
	if receive {
		cq = q.rcq
	}
	if st != mlx5.WCSuccess {
		if receive {
			e.SetOpOwn(mlx5.CQERespErr, false, 0)
		} else {
			e.SetOpOwn(mlx5.CQEReqErr, false, 0)
		}
		e.Syndrome, e.VendorSyndrome = syndromeOf(st)
		e.SopDropQPN = uint32(op)<<24 | q.qpn
		cq.push(&e, false)
		return
	}
	e.SetOpOwn(mlx5.CQEReq, false, 0)
	e.SopDropQPN = uint32(op)<<24 | q.qpn
	switch op {
	case mlx5.OpcodeRDMARead:
		e.ByteCnt = byteLen
	case mlx5.OpcodeAtomicCS, mlx5.OpcodeAtomicFA:
		e.ByteCnt = mlx5.AtomicSize
	default:
		e.ByteCnt = byteLen
	}
	cq.push(&e, false)
}

// syndromeOf gives the syndrome and vendor syndrome a ConnectX reports for a status. Vendor
// syndromes are firmware-specific and software only displays them (wc.vendor_err); the
// device reports the values ConnectX firmware is seen to report in public error logs
// (UCX's "synd 0x15 vend 0x81", "synd 0x13 vend 0x88", "synd 0x4 vend 0x51") and 0 where no
// such value is known.
func syndromeOf(st mlx5.WCStatus) (syndrome, vendor uint8) {
	s, ok := mlx5.SyndromeForStatus(st)
	if !ok {
		s = mlx5.SyndromeLocalQPOpErr
	}
	switch st {
	case mlx5.WCRetryExcErr:
		vendor = 0x81
	case mlx5.WCRemAccessErr:
		vendor = 0x88
	case mlx5.WCLocProtErr:
		vendor = 0x51
	}
	return s, vendor
}
