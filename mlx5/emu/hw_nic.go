package emu

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/uverbs"
)

// nicHW binds the driver to the device model of package nic: the firmware commands become
// calls on nic.Device, and the device's callbacks become the driver's events.
type nicHW struct {
	d   *nic.Device
	ev  hwEvents
	mu  sync.Mutex
	cqs map[uint32]*nic.CQ
	qps map[uint32]*nic.QP
}

func (h *nicHW) regMR(pdn uint32, addr, length, iova uint64, access uint32) (uint32, uint32, error) {
	if err := h.d.Dead("reg mr"); err != nil {
		return 0, 0, err
	}
	if iova != addr {
		// The device model addresses regions by their virtual address; a region registered
		// at another iova (hca_va) would need a translation it does not have.
		return 0, 0, fmt.Errorf("iova %#x differs from the address %#x: not emulated: %w", iova, addr, unix.EOPNOTSUPP)
	}
	mr, err := h.d.RegisterMR(pdn, addr, length, nic.Access(access&0xf))
	if err != nil {
		return 0, 0, err
	}
	return mr.LKey, mr.RKey, nil
}

func (h *nicHW) deregMR(lkey uint32) error { return h.d.DeregisterMR(lkey) }

func (h *nicHW) createCQ(s cqSpec) (uint32, error) {
	if err := h.d.Dead("create cq"); err != nil {
		return 0, err
	}
	var cqn atomic.Uint32
	u, _ := s.uar.(*nic.UAR)
	cq, err := h.d.CreateCQ(nic.CQConfig{
		Buf: s.bufAddr, CQEs: int(s.ncqe), CQESize: int(s.cqeSize), DBRec: s.dbAddr, UAR: u,
		OnComp:  func() { h.ev.completion(cqn.Load()) },
		OnError: func() { h.ev.cqError(cqn.Load()) },
	})
	if err != nil {
		return 0, err
	}
	cqn.Store(cq.CQN())
	h.mu.Lock()
	h.cqs[cq.CQN()] = cq
	h.mu.Unlock()
	return cq.CQN(), nil
}

func (h *nicHW) destroyCQ(cqn uint32) error {
	h.mu.Lock()
	cq := h.cqs[cqn]
	delete(h.cqs, cqn)
	h.mu.Unlock()
	if cq == nil {
		return fmt.Errorf("cq %#x: %w", cqn, unix.EINVAL)
	}
	return cq.Destroy()
}

func (h *nicHW) createQP(s qpSpec) (uint32, error) {
	if err := h.d.Dead("create qp"); err != nil {
		return 0, err
	}
	h.mu.Lock()
	scq, rcq := h.cqs[s.sendCQN], h.cqs[s.recvCQN]
	h.mu.Unlock()
	u, _ := s.uar.(*nic.UAR)
	var qpn atomic.Uint32
	qp, err := h.d.CreateQP(nic.QPConfig{
		PD: s.pdn, SendCQ: scq, RecvCQ: rcq, Buf: s.bufAddr,
		RQWQEs: int(s.rqWQECnt), RQWQEShift: int(s.rqWQEShift), SQWQEBBs: int(s.sqWQECnt),
		SQOffset: uint64(s.rqWQECnt) << s.rqWQEShift, DBRec: s.dbAddr, UAR: u, Bfreg: s.bfreg, SharedBfreg: s.sharedBfreg, AnyBfreg: s.anyBfreg,
		MaxSendSGE: int(s.maxSendSGE), MaxRecvSGE: int(s.maxRecvSGE), MaxInline: int(s.maxInline),
		UserIndex: s.userIndex,
		OnError: func(st mlx5.WCStatus) {
			if ev, ok := qpErrorEvent(st); ok {
				h.ev.qpEvent(qpn.Load(), ev)
			}
		},
	})
	if err != nil {
		return 0, err
	}
	qpn.Store(qp.QPN())
	h.mu.Lock()
	h.qps[qp.QPN()] = qp
	h.mu.Unlock()
	return qp.QPN(), nil
}

func (h *nicHW) qp(qpn uint32) *nic.QP {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.qps[qpn]
}

func (h *nicHW) modifyQP(qpn uint32, cur, next QPState, a *qpAttr) error {
	qp := h.qp(qpn)
	if qp == nil {
		return fmt.Errorf("qp %#x: %w", qpn, unix.EINVAL)
	}
	if next == QPSSQD || next == QPSSQE {
		return fmt.Errorf("qp %#x: %v not emulated: %w", qpn, next, unix.EINVAL)
	}
	if cur == next && next == QPSReset {
		return nil // mlx5_ib_modify_qp: RESET→RESET issues no command
	}
	if next != QPSErr && next != QPSReset {
		// mlx5_cmd_exec in internal error fails the transitions with EIO but fakes success
		// for 2ERR_QP and 2RST_QP (mlx5_internal_err_ret_value), so that cleanup works.
		if err := h.d.Dead("modify qp"); err != nil {
			return err
		}
	}
	attr := nic.QPAttr{
		Port: int(a.port), RemoteQPN: a.destQPN, RemoteAddr: netip.AddrFrom16(a.av.dgid).Unmap(),
		PathMTU: a.pathMTU.Bytes(), SQPSN: a.sqPSN, RQPSN: a.rqPSN, Timeout: a.timeout,
		RetryCnt: a.retryCnt, RNRRetry: a.rnrRetry, MinRNR: a.minRNRTimer, MaxRDAtom: a.maxRdAtomic,
		MaxDestRD: a.maxDestRdAtomic, Access: nic.Access(a.accessFlags & 0xe),
	}
	return qp.Modify(nic.QPState(next), attr)
}

func (h *nicHW) qpState(qpn uint32) QPState {
	if qp := h.qp(qpn); qp != nil {
		return QPState(qp.State())
	}
	return QPSErr
}

func (h *nicHW) destroyQP(qpn uint32) error {
	h.mu.Lock()
	qp := h.qps[qpn]
	delete(h.qps, qpn)
	h.mu.Unlock()
	if qp == nil {
		return fmt.Errorf("qp %#x: %w", qpn, unix.EINVAL)
	}
	// destroy_qp_common of mlx5_ib moves the QP to RESET (2RST_QP) before destroying it, so
	// the transport has stopped and nothing of it outlives the command.
	if qp.State() != nic.QPSReset {
		_ = qp.Modify(nic.QPSReset, nic.QPAttr{})
	}
	return qp.Destroy()
}

func (h *nicHW) allocUAR() (uarPage, error) {
	if err := h.d.Dead("alloc uar"); err != nil {
		return nil, err
	}
	return h.d.AllocUAR()
}

func (h *nicHW) freeUAR(u uarPage) error { return h.d.FreeUAR(u.(*nic.UAR)) }

func (h *nicHW) portUp(port int) bool {
	if p := h.d.Port(port); p != nil {
		return p.Active()
	}
	return false
}

func (h *nicHW) close() error { return h.d.Close() }

// qpErrorEvent is the affiliated asynchronous event mlx5 raises when a QP enters ERR by itself
// (mlx5_ib_qp_event): errors a completion reports (retry exceeded, remote errors, local
// protection errors, flushes) raise none, as on ConnectX; a responder's refused remote access
// (no receive WQE to report it on) raises IBV_EVENT_QP_ACCESS_ERR (MLX5_EVENT_TYPE_WQ_ACCESS_ERROR),
// an invalid request IBV_EVENT_QP_REQ_ERR (WQ_INVAL_REQ_ERROR), anything else
// IBV_EVENT_QP_FATAL (WQ_CATAS_ERROR).
func qpErrorEvent(st mlx5.WCStatus) (uint32, bool) {
	switch st {
	case mlx5.WCRetryExcErr, mlx5.WCRNRRetryExcErr, mlx5.WCRemAccessErr, mlx5.WCRemInvReqErr, mlx5.WCRemOpErr,
		mlx5.WCBadRespErr, mlx5.WCLocProtErr, mlx5.WCWRFlushErr, mlx5.WCRemAbortErr, mlx5.WCRemInvRdReqErr:
		return 0, false
	case mlx5.WCLocAccessErr:
		return uverbs.EventQPAccessErr, true
	case mlx5.WCLocQPOpErr, mlx5.WCLocLenErr:
		return uverbs.EventQPReqErr, true
	}
	return uverbs.EventQPFatal, true
}
