package nic

import (
	"sync"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

// qpHost is what the device gives the RC engine of one QP (rc.Host): memory keys for remote
// access, the receive queue, and CQE writing for completions. Its methods never take q.mu, so
// the engine may call them while the device is inside Post or Modify.
//
// The engine delivers completions and QP errors outside its own lock, so a callback it queued
// before a modify to RESET or a destroy may arrive after either returned. Every callback
// therefore passes the QP's gate, which is open only while the QP is out of RESET and not
// destroyed: RESET and Destroy close it and wait for the callbacks already inside, so once
// they return no callback of the old incarnation touches the QP's rings, its doorbell record
// or its CQs, and late ones are dropped. A late callback can still find the gate open again
// when the QP left RESET meanwhile; the engine's own state tells those apart (a completion
// or error of the engine's previous incarnation cannot match its new state), see stale.
type qpHost struct{ q *QP }

var _ rc.Host = (*qpHost)(nil)

// cbGate admits engine callbacks (and the watcher's receive flushing) while the QP is live.
// enter never blocks on the QP's state, so callbacks may nest (QPError flushes receives,
// which pops them); close waits until no caller is inside. The zero value is closed (a new
// QP is in RESET).
type cbGate struct {
	mu     sync.Mutex
	idle   sync.Cond // signalled when inside drops to 0 while closed
	open   bool
	inside int
}

// enter reports whether the QP is live; when it is, the caller must call exit.
func (g *cbGate) enter() bool {
	g.mu.Lock()
	ok := g.open
	if ok {
		g.inside++
	}
	g.mu.Unlock()
	return ok
}

func (g *cbGate) exit() {
	g.mu.Lock()
	g.inside--
	if g.inside == 0 && !g.open && g.idle.L != nil {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// close refuses later callers and waits for those inside. It must not be called from a
// callback of the same QP (it would wait for itself); callbacks never modify or destroy QPs.
func (g *cbGate) close() {
	g.mu.Lock()
	g.open = false
	if g.idle.L == nil {
		g.idle.L = &g.mu
	}
	for g.inside > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}

// reopen admits callbacks again (the QP left RESET).
func (g *cbGate) reopen() {
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
}

// RemoteMemory checks an incoming request's rkey against the QP's protection domain, the
// region's range and its access rights. A QP in RESET or destroyed grants nothing.
func (h *qpHost) RemoteMemory(rkey uint32, va uint64, length int, access rc.Access) ([]byte, error) {
	q := h.q
	if !q.gate.enter() {
		return nil, rc.ErrAccess
	}
	defer q.gate.exit()
	return q.dev.remoteAccess(q.pd, rkey, va, length, access)
}

// PopRecv consumes the next posted receive WQE; a QP in RESET or destroyed has none.
func (h *qpHost) PopRecv() (rc.Recv, bool) {
	q := h.q
	if !q.gate.enter() {
		return rc.Recv{}, false
	}
	defer q.gate.exit()
	return q.popRecv()
}

// SendCompleted turns the engine's completion of a send WR into a CQE: every error, and
// successes of signaled WRs (an unsignaled WR produces no CQE unless it fails).
func (h *qpHost) SendCompleted(c rc.SendCompletion) {
	q := h.q
	if !q.gate.enter() {
		return
	}
	defer q.gate.exit()
	if stale(q.tr.State(), rc.StateRTS) {
		return
	}
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
	if !q.gate.enter() {
		return
	}
	defer q.gate.exit()
	if stale(q.tr.State(), rc.StateRTR) {
		return
	}
	st := mlx5.WCStatus(c.Status)
	e := cqe{sopDropQPN: q.qpn, wqeCounter: c.Index, srqnUIdx: q.uidx}
	if st != mlx5.WCSuccess {
		e.opcode = mlx5.CQERespErr
		e.syndrome, e.vendorSyndrome = syndromeOf(st)
		q.rcq.push(&e, false)
		return
	}
	switch c.Op {
	case rc.OpSendImm:
		e.opcode = mlx5.CQERespSendImm
	case rc.OpWriteImm:
		e.opcode = mlx5.CQERespWrImm
	default:
		e.opcode = mlx5.CQERespSend
	}
	e.byteCnt = c.ByteLen
	if c.HasImm {
		e.immInvalPKey = c.Imm
	}
	// RoCE: the GRH is always present (l3/grh bits 29:28 = 1), source QPN in 23:0.
	e.flagsRQPN = 1<<28 | c.SrcQPN&0xffffff
	if q.dev.late.hold(q, &e, c.Solicited) {
		return
	}
	q.rcq.push(&e, c.Solicited)
}

// QPError records that the engine moved the QP to ERR by itself. A late one (the QP was
// reset or destroyed since the engine queued it) is dropped by the gate: RESET and Destroy
// change the state only with the gate closed, so the swap below never overrides them.
func (h *qpHost) QPError(status rc.Status) {
	q := h.q
	if !q.gate.enter() {
		return
	}
	defer q.gate.exit()
	if stale(q.tr.State(), rc.StateError) {
		return
	}
	if QPState(q.state.Swap(uint32(QPSErr))) == QPSErr {
		return
	}
	q.dev.watchErr(q)
	q.tr.FlushRecv()
	idle.hot()
	if !q.dev.alive() {
		return // a hung or dead device raises nothing of its QPs any more
	}
	if q.onError != nil {
		q.onError(mlx5.WCStatus(status))
	}
	if ev := asyncEventFor(mlx5.WCStatus(status)); ev != 0 && q.onEvent != nil {
		q.onEvent(ev)
	}
	q.dev.kick(q)
}

// stale reports whether a callback delivered while the engine is in state s belongs to an
// earlier incarnation of the QP (before a reset): the engine produces send completions only
// from RTS on, receive completions from RTR on, and a QP error only as it enters Error, and
// it keeps that state until the QP is modified, which a reset is.
func stale(s, from rc.State) bool {
	switch from {
	case rc.StateRTR:
		return s == rc.StateReset || s == rc.StateInit
	case rc.StateRTS:
		return s == rc.StateReset || s == rc.StateInit || s == rc.StateRTR
	}
	return s != rc.StateError
}

// writeCQE writes a requester (or, for device-flushed receives, responder) CQE.
func (q *QP) writeCQE(receive bool, op mlx5.Opcode, index uint16, st mlx5.WCStatus, byteLen uint32) {
	e := cqe{wqeCounter: index, srqnUIdx: q.uidx}
	cq := q.scq
	if receive {
		cq = q.rcq
	}
	if st != mlx5.WCSuccess {
		e.opcode = mlx5.CQEReqErr
		if receive {
			e.opcode = mlx5.CQERespErr
		}
		e.syndrome, e.vendorSyndrome = syndromeOf(st)
		e.sopDropQPN = uint32(op)<<24 | q.qpn
		cq.push(&e, false)
		return
	}
	e.opcode = mlx5.CQEReq
	e.sopDropQPN = uint32(op)<<24 | q.qpn
	switch op {
	case mlx5.OpcodeRDMARead:
		e.byteCnt = byteLen
	case mlx5.OpcodeAtomicCS, mlx5.OpcodeAtomicFA:
		e.byteCnt = mlx5.AtomicSize
	default:
		e.byteCnt = byteLen
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
