package nic

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// QPState is a QP state with the values of enum ibv_qp_state (IB_UVERBS_QPS_*).
type QPState uint8

// QP states. The device model has no SQD/SQE for RC: a send queue error moves the QP to ERR.
const (
	QPSReset QPState = 0
	QPSInit  QPState = 1
	QPSRTR   QPState = 2
	QPSRTS   QPState = 3
	QPSSQD   QPState = 4
	QPSSQE   QPState = 5
	QPSErr   QPState = 6
)

// String names the state as verbs does.
func (s QPState) String() string {
	switch s {
	case QPSReset:
		return "RESET"
	case QPSInit:
		return "INIT"
	case QPSRTR:
		return "RTR"
	case QPSRTS:
		return "RTS"
	case QPSSQD:
		return "SQD"
	case QPSSQE:
		return "SQE"
	case QPSErr:
		return "ERR"
	}
	return "QPState(?)"
}

// QPConfig describes an RC QP as the mlx5 create_qp driver data gives it: one software buffer
// holding the receive queue at offset 0 and the send queue at SQOffset, a doorbell record, and
// the blue-flame register (UAR page and register within it) its send doorbells are written to.
type QPConfig struct {
	PD             uint32
	SendCQ, RecvCQ *CQ
	// Buf is the address of the work queue buffer.
	Buf uint64
	// RQWQEs is the number of receive WQEs (a power of two, or 0 for no receive queue) and
	// RQWQEShift log2 of their stride (rq_wqe_shift, at least 4).
	RQWQEs, RQWQEShift int
	// SQWQEBBs is the send queue size in 64-byte basic blocks (a power of two).
	SQWQEBBs int
	// SQOffset is the send queue's offset in Buf (mlx5_ib_create_qp.sq_buf_addr - buf_addr in
	// libmlx5 terms: rq size rounded as libmlx5 does).
	SQOffset uint64
	// DBRec is the address of the 8-byte doorbell record (receive counter, send counter).
	DBRec uint64
	// UAR and Bfreg (0..BfregsPerUAR-1 within the page) name the register the QP rings.
	// A register serves one QP unless every QP bound to it says SharedBfreg: see CreateQP.
	UAR   *UAR
	Bfreg int
	// SharedBfreg binds the QP to a register other QPs may share (mlx5_ib's medium-latency
	// bfregs and bfreg 0); without it the register must be free and stays the QP's own.
	SharedBfreg bool
	// AnyBfreg binds the QP, shared, to every register of UAR (Bfreg is then ignored): the
	// page was allocated dynamically and the library, not the kernel, chose which of its
	// registers the QP rings (libmlx5 with MLX5_QP_FLAG_UAR_PAGE_INDEX).
	AnyBfreg bool
	// MaxSendSGE, MaxRecvSGE and MaxInline are the QP's capabilities; 0 means no limit beyond
	// the WQE size. A WQE exceeding them fails with a local QP operation error.
	MaxSendSGE, MaxRecvSGE, MaxInline int
	// UserIndex is the QP context's user_index, written to the srqn_uidx field of each of
	// the QP's CQEs: with CQE version 1 libmlx5 finds the QP of a CQE by it, not by QPN.
	UserIndex uint32
	// OnError is called whenever the QP enters ERR by itself (transport error, responder
	// error, local error), with the ibv_wc_status of the cause. It must not block.
	OnError func(status mlx5.WCStatus)
	// OnAsyncEvent is called for the errors a ConnectX reports as asynchronous QP events
	// (mlx5 WQ_INVAL_REQ_ERROR / WQ_ACCESS_ERROR / WQ_CATAS_ERROR): the responder-side
	// errors no work request of this QP can report. Requester errors (retry exceeded, NAKs,
	// local WQE errors) are reported by their error CQE alone. It must not block.
	OnAsyncEvent func(ev QPEvent)
}

// QPEvent is an asynchronous QP event, with the values of enum ibv_event_type.
type QPEvent uint8

// QP events.
const (
	QPEventFatal     QPEvent = 1 // IBV_EVENT_QP_FATAL: local work queue catastrophic error
	QPEventReqErr    QPEvent = 2 // IBV_EVENT_QP_REQ_ERR: invalid request (responder NAKed it)
	QPEventAccessErr QPEvent = 3 // IBV_EVENT_QP_ACCESS_ERR: remote access violation (responder)
)

// asyncEventFor gives the asynchronous event for an engine error cause, or 0 when the cause is
// a requester error that an error CQE reports. The engine reports responder errors with the
// local statuses of enum ibv_wc_status (package rc, responderErrorLocked).
func asyncEventFor(st mlx5.WCStatus) QPEvent {
	switch st {
	case mlx5.WCLocQPOpErr, mlx5.WCLocLenErr:
		return QPEventReqErr
	case mlx5.WCLocAccessErr:
		return QPEventAccessErr
	}
	return 0
}

// QPAttr is the complete set of attributes of a QP the transport uses; the kernel keeps them,
// merges each modify's attribute mask into them and passes the result to Modify.
type QPAttr struct {
	Port       int        // port number (1-based)
	RemoteQPN  uint32     // dest_qp_num
	RemoteAddr netip.Addr // the IP address in the remote GID (ah_attr.grh.dgid)
	PKey       uint16     // 0 means the default partition 0xffff
	PathMTU    int        // bytes; 0 means the port's MTU
	SQPSN      uint32
	RQPSN      uint32
	Timeout    uint8 // local ACK timeout exponent: 4.096 µs × 2^Timeout (0 = infinite)
	RetryCnt   uint8
	RNRRetry   uint8
	MinRNR     uint8 // min_rnr_timer code
	MaxRDAtom  uint8 // max_rd_atomic
	MaxDestRD  uint8 // max_dest_rd_atomic
	Access     Access
}

// QP is an RC queue pair of the device: its rings in software memory, the RC engine that
// carries its traffic, and its state.
type QP struct {
	qpn     uint32
	dev     *Device
	pd      uint32
	scq     *CQ
	rcq     *CQ
	uar     *UAR
	bfrg    int
	onError func(mlx5.WCStatus)
	onEvent func(QPEvent)
	uidx    uint32 // QPConfig.UserIndex

	sqRing     *sendRing
	rqRing     *recvRing
	dbrec      dbRecord
	sqBBs      uint16 // send queue size in WQEBBs
	rqN        uint16
	maxSendSGE int
	maxRecvSGE int
	maxInline  int

	state atomic.Uint32
	tr    rc.Transport
	host  qpHost
	gate  cbGate // admits engine callbacks while out of RESET and not destroyed (host.go)

	mu        sync.Mutex // serialises send-queue processing and Modify
	attr      QPAttr
	sqCI      uint16  // next WQEBB the device reads
	wqe       sendWQE // parse scratch, under mu
	wr        rc.WorkRequest
	locals    [][][]byte // per send queue slot gather/scatter list storage, under mu
	dbPending bool       // rung while not yet in RTS
	destroyed bool

	outstanding atomic.Int32 // WRs handed to the engine and not yet completed
	stalled     atomic.Bool  // a local completion waits for outstanding WRs
	kicked      atomic.Bool

	rqMu    sync.Mutex
	rqCI    uint16 // next receive WQE the device consumes
	badRecv *localCompletion
	rsegs   [maxRecvSegs]wqeData // parse scratch, under rqMu
}

// maxRecvSegs bounds the scatter entries of a receive WQE (a 4 KiB stride of 16-byte entries).
const maxRecvSegs = 256

// CreateQP creates an RC QP in RESET. Its send doorbells are accepted only through the
// register cfg names. A dedicated register (SharedBfreg false) must be free; a shared one
// may carry any number of QPs that all asked for sharing. The device sees a register only as
// memory, so on a shared register one QP's doorbell can be overwritten by another's before
// the watcher looks: the watcher then picks the QP by the doorbell's QPN and re-checks every
// QP bound to the register against its doorbell record (doc.go explains what that means). A
// QP's own successive doorbells may overwrite each other harmlessly: the device executes up
// to the send counter of the doorbell record, which covers every earlier doorbell.
func (d *Device) CreateQP(cfg QPConfig) (*QP, error) {
	const op = "create qp"
	if d.closed.Load() {
		return nil, newErr(op, ErrClosed, unix.ENODEV, "device %s", d.name)
	}
	pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	switch {
	case cfg.SendCQ == nil || cfg.RecvCQ == nil:
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "missing cq")
	case cfg.UAR == nil || cfg.UAR.dev != d || !cfg.AnyBfreg && (cfg.Bfreg < 0 || cfg.Bfreg >= BfregsPerUAR):
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "bad bfreg %d", cfg.Bfreg)
	case !pow2(cfg.SQWQEBBs) || cfg.SQWQEBBs > 1<<15:
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "sq of %d wqebbs", cfg.SQWQEBBs)
	case cfg.RQWQEs != 0 && (!pow2(cfg.RQWQEs) || cfg.RQWQEs > 1<<15 || cfg.RQWQEShift < 4 || cfg.RQWQEShift > 12 || 1<<cfg.RQWQEShift/segSize > maxRecvSegs):
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "rq of %d wqes, shift %d", cfg.RQWQEs, cfg.RQWQEShift)
	case cfg.Buf == 0 || cfg.Buf%64 != 0 || cfg.SQOffset%64 != 0 || cfg.SQOffset < uint64(cfg.RQWQEs)<<cfg.RQWQEShift:
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "buffer %#x sq offset %#x", cfg.Buf, cfg.SQOffset)
	case cfg.DBRec == 0 || cfg.DBRec%8 != 0:
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "dbrec %#x", cfg.DBRec)
	}
	bufLen := cfg.SQOffset + uint64(cfg.SQWQEBBs)*wqeBB
	if !checkMapped(cfg.Buf, bufLen) || !checkMapped(cfg.DBRec, 8) {
		return nil, newErr(op, ErrInvalid, unix.EFAULT, "buffer %#x+%#x or dbrec %#x not mapped", cfg.Buf, bufLen, cfg.DBRec)
	}
	q := &QP{
		dev: d, pd: cfg.PD, scq: cfg.SendCQ, rcq: cfg.RecvCQ, uar: cfg.UAR, bfrg: cfg.Bfreg,
		onError:    cfg.OnError,
		onEvent:    cfg.OnAsyncEvent,
		uidx:       cfg.UserIndex & 0xffffff,
		sqBBs:      uint16(cfg.SQWQEBBs),
		rqN:        uint16(cfg.RQWQEs),
		maxSendSGE: cfg.MaxSendSGE,
		maxRecvSGE: cfg.MaxRecvSGE,
		maxInline:  cfg.MaxInline,
	}
	var err error
	if q.dbrec, err = newDBRecord(hostBytes(cfg.DBRec, 8)); err != nil {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "doorbell record: %v", err)
	}
	if q.sqRing, err = newSendRing(hostBytes(cfg.Buf+cfg.SQOffset, cfg.SQWQEBBs*wqeBB), cfg.SQWQEBBs); err != nil {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "send queue: %v", err)
	}
	if cfg.RQWQEs > 0 {
		if q.rqRing, err = newRecvRing(hostBytes(cfg.Buf, cfg.RQWQEs<<cfg.RQWQEShift), cfg.RQWQEs, cfg.RQWQEShift); err != nil {
			return nil, newErr(op, ErrInvalid, unix.EINVAL, "receive queue: %v", err)
		}
	}
	q.host.q = q
	regs, shared := []int{cfg.Bfreg}, cfg.SharedBfreg
	if cfg.AnyBfreg {
		regs, shared, q.bfrg = nil, true, -1
		for i := range BfregsPerUAR {
			regs = append(regs, i)
		}
	}
	// Everything the watcher reads from q is set before the register is bound to it.
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, reg := range regs {
		if r := cfg.UAR.bf[reg].Load(); r != nil && len(r.qps) > 0 && (!shared || !r.shared) {
			return nil, newErr(op, ErrBusy, unix.EBUSY, "uar %d bfreg %d already serves a qp", cfg.UAR.Index, reg)
		}
	}
	d.objMu.Lock()
	for {
		d.nextQPN = (d.nextQPN + 1) & 0xffffff
		if d.nextQPN < firstQPN {
			d.nextQPN = firstQPN
		}
		if d.qps[d.nextQPN] == nil {
			break
		}
	}
	q.qpn = d.nextQPN
	q.tr = d.newTr(&q.host)
	d.qps[q.qpn] = q
	d.objMu.Unlock()
	for i, reg := range regs {
		if err := cfg.UAR.bind(reg, q, shared); err != nil {
			for _, done := range regs[:i] {
				cfg.UAR.unbind(done, q)
			}
			d.objMu.Lock()
			delete(d.qps, q.qpn)
			d.objMu.Unlock()
			_ = q.tr.Close()
			return nil, err
		}
	}
	q.scq.users.Add(1)
	q.rcq.users.Add(1)
	return q, nil
}

// QPN is the QP number.
func (q *QP) QPN() uint32 { return q.qpn }

// State returns the QP's current state.
func (q *QP) State() QPState { return QPState(q.state.Load()) }

// Transport returns the QP's RC engine (for statistics and tests).
func (q *QP) Transport() rc.Transport { return q.tr }

// Modify moves the QP to state to with the complete attribute set attr. The kernel has
// already checked the transition and the attribute mask (ib_modify_qp_is_ok); the device
// applies it. RESET clears the rings' indexes as the hardware does (software restarts its
// counters at 0 too); ERR flushes every outstanding and posted WR and receive.
func (q *QP) Modify(to QPState, attr QPAttr) error {
	const op = "modify qp"
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return newErr(op, ErrClosed, unix.EINVAL, "qp %#x destroyed", q.qpn)
	}
	var rs rc.State
	switch to {
	case QPSReset:
		rs = rc.StateReset
	case QPSInit:
		rs = rc.StateInit
	case QPSRTR:
		rs = rc.StateRTR
	case QPSRTS:
		rs = rc.StateRTS
	case QPSErr:
		rs = rc.StateError
	default:
		return newErr(op, ErrInvalid, unix.EINVAL, "qp %#x to %v not supported", q.qpn, to)
	}
	cfg, err := q.rcConfig(attr, to)
	if err != nil {
		return err
	}
	if to == QPSReset {
		// Callbacks the engine queued before the reset may still be on their way: refuse
		// them from now on and wait for those already inside, before the rings restart.
		q.gate.close()
	}
	if err := q.tr.Modify(rs, cfg); err != nil {
		if to == QPSReset && q.State() != QPSReset {
			q.gate.reopen()
		}
		return newErr(op, ErrInvalid, unix.EINVAL, "qp %#x to %v: %v", q.qpn, to, err)
	}
	q.attr = attr
	if to == QPSReset {
		q.sqCI = 0
		q.dbPending = false
		q.outstanding.Store(0)
		q.stalled.Store(false)
		q.rqMu.Lock()
		q.rqCI = 0
		q.badRecv = nil
		q.rqMu.Unlock()
	}
	q.state.Store(uint32(to))
	if to != QPSReset {
		q.gate.reopen()
	}
	switch to {
	case QPSRTS:
		if q.dbPending {
			q.dbPending = false
			q.dev.kick(q)
		}
	case QPSErr:
		q.dev.watchErr(q)
		q.tr.FlushRecv()
		q.dev.kick(q)
	case QPSReset:
		q.dev.unwatchErr(q)
	}
	return nil
}

// rcConfig turns the verbs attributes into the engine's configuration.
func (q *QP) rcConfig(attr QPAttr, to QPState) (rc.Config, error) {
	cfg := rc.Config{
		LocalQPN:        q.qpn,
		RemoteQPN:       attr.RemoteQPN & 0xffffff,
		RemoteIP:        attr.RemoteAddr,
		PKey:            attr.PKey,
		PathMTU:         attr.PathMTU,
		SQPSN:           attr.SQPSN & 0xffffff,
		RQPSN:           attr.RQPSN & 0xffffff,
		Timeout:         attr.Timeout,
		RetryCnt:        attr.RetryCnt,
		RNRRetry:        attr.RNRRetry,
		MinRNRTimer:     attr.MinRNR,
		MaxRDAtomic:     attr.MaxRDAtom,
		MaxDestRDAtomic: attr.MaxDestRD,
		Clock:           q.dev.clk,
	}
	if attr.Access&AccessRemoteWrite != 0 {
		cfg.RemoteAccess |= rc.AccessRemoteWrite
	}
	if attr.Access&AccessRemoteRead != 0 {
		cfg.RemoteAccess |= rc.AccessRemoteRead
	}
	if attr.Access&AccessRemoteAtomic != 0 {
		cfg.RemoteAccess |= rc.AccessRemoteAtomic
	}
	if to == QPSReset || to == QPSErr {
		return cfg, nil
	}
	p := q.dev.Port(attr.Port)
	if p == nil {
		return cfg, newErr("modify qp", ErrInvalid, unix.EINVAL, "qp %#x port %d", q.qpn, attr.Port)
	}
	cfg.Link = txGate{Link: p.link, d: q.dev}
	if cfg.PathMTU == 0 {
		cfg.PathMTU = p.mtu
	}
	if cfg.PathMTU > p.mtu {
		return cfg, newErr("modify qp", ErrInvalid, unix.EINVAL, "qp %#x path mtu %d above port mtu %d", q.qpn, cfg.PathMTU, p.mtu)
	}
	return cfg, nil
}

// Destroy removes the QP: its engine stops, its register and CQs are released. Outstanding
// WRs are not completed, as on hardware. When it returns, no goroutine of the device or of
// the engine reads or writes the QP's rings or doorbell record any more, nor writes CQEs for
// it: software may unmap that memory (and destroy the CQs) at once.
func (q *QP) Destroy() error {
	q.mu.Lock()
	if q.destroyed {
		q.mu.Unlock()
		return newErr("destroy qp", ErrNotFound, unix.EINVAL, "qp %#x", q.qpn)
	}
	q.destroyed = true
	q.mu.Unlock()
	d := q.dev
	d.objMu.Lock()
	delete(d.qps, q.qpn)
	d.objMu.Unlock()
	if q.bfrg < 0 {
		for i := range BfregsPerUAR {
			q.uar.unbind(i, q)
		}
	} else {
		q.uar.unbind(q.bfrg, q)
	}
	// The watcher no longer processes the send queue (destroyed is set under q.mu, which
	// process holds). Stop the engine, then wait for the callbacks it is still delivering
	// and for a receive flush in progress; later ones are dropped. Only then stop flushing
	// receives, so a late QP error cannot put the QP back on the watcher's list.
	err := q.tr.Close()
	q.gate.close()
	d.unwatchErr(q)
	q.scq.users.Add(-1)
	q.rcq.users.Add(-1)
	return err
}

// handlePacket hands an incoming packet to the engine; a QP in RESET drops it, as the
// hardware does for a QP that has no transport context yet.
func (q *QP) handlePacket(p *roce.Packet) {
	if q.State() == QPSReset {
		return
	}
	q.tr.HandlePacket(p)
}

// Describe reports the device's view of the send queue and the engine's state, for a failing
// test's message.
func (q *QP) Describe() string {
	q.mu.Lock()
	s := fmt.Sprintf("nic state %v sqCI %d db %d dbPending %v outstanding %d stalled %v", q.State(), q.sqCI,
		q.dbrec.sendCounter(), q.dbPending, q.outstanding.Load(), q.stalled.Load())
	q.mu.Unlock()
	if d, ok := q.tr.(interface{ Describe() string }); ok {
		s += "; " + d.Describe()
	}
	return s
}
