package provider

import (
	"fmt"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

// CreateQP is ibv_create_qp for an RC QP, following mlx5_create_qp: the rings are sized as
// libmlx5 sizes them (so Cap reports the same rounded values), allocated in one page-aligned
// buffer (RQ first), with a doorbell record; the kernel returns the QPN and the bfreg the QP
// rings its doorbell through.
func (p *PD) CreateQP(a verbs.QPInitAttr) (verbs.QP, error) {
	q, err := p.createQP(a)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return q, nil
}

func (p *PD) createQP(a verbs.QPInitAttr) (*QP, error) {
	c := p.ctx
	scq, _ := a.SendCQ.(*CQ)
	rcq, _ := a.RecvCQ.(*CQ)
	if scq == nil || rcq == nil || scq.ctx != c || rcq.ctx != c {
		return nil, fmt.Errorf("provider: create qp: %w: send and receive CQs of this context required", verbs.ErrInvalidArgument)
	}
	l, err := calcQPLayout(c.lim, a.Cap)
	if err != nil {
		return nil, opError("create qp", err)
	}
	if l.bufSize == 0 {
		return nil, fmt.Errorf("provider: create qp: %w: no send and no receive queue", verbs.ErrInvalidArgument)
	}
	mem, err := newRingBuffer(l.bufSize)
	if err != nil {
		return nil, opError("create qp", err)
	}
	dbMem, err := newRingBuffer(mlx5.DBRecSize)
	if err != nil {
		mem.Free()
		return nil, opError("create qp", err)
	}
	id := a.Handle
	if id == 0 {
		id = c.newID()
	}
	uidx, err := c.newUserIndex()
	if err != nil {
		mem.Free()
		dbMem.Free()
		return nil, opError("create qp", err)
	}
	q := &QP{ctx: c, pd: p, sendCQ: scq, recvCQ: rcq, id: id, mem: mem, dbMem: dbMem,
		dbrec: dbMem.Bytes()[:mlx5.DBRecSize], uidx: uidx}
	fail := func(err error) (*QP, error) {
		mem.Free()
		dbMem.Free()
		c.freeUserIndex(uidx)
		return nil, opError("create qp", err)
	}

	drv := mlx5.CreateQP{BufAddr: mem.Addr(), DBAddr: dbMem.Addr(), SQWQECount: uint32(l.sqWQECnt),
		RQWQECount: uint32(l.rqWQECnt), RQWQEShift: uint32(l.rqWQEShift), UIdx: uidx}
	var in [mlx5.CreateQPSize]byte
	var out [mlx5.CreateQPRespSize]byte
	drv.Put(in[:])
	reqCap := a.Cap
	if l.sqWQECnt > 0 {
		reqCap.MaxInlineData = uint32(l.maxInline)
	}
	r, err := c.cmdCreateQP(uverbs.CreateQPRequest{
		Type: uverbs.QPTypeRC, PD: p.handle, SendCQ: scq.handle, RecvCQ: rcq.handle,
		Cap:    uverbs.QPCap{Send_wr: reqCap.MaxSendWR, Recv_wr: reqCap.MaxRecvWR, Send_sge: reqCap.MaxSendSGE, Recv_sge: reqCap.MaxRecvSGE, Inline_data: reqCap.MaxInlineData},
		SigAll: a.SigAll, UserHandle: q.id, AsyncFD: c.asyncFD,
	}, in[:], out[:])
	if err != nil {
		return fail(err)
	}
	destroy := func(err error) (*QP, error) {
		c.cmdDestroyQP(r.Handle)
		return fail(err)
	}
	resp, err := mlx5.DecodeCreateQPResp(out[:])
	if err != nil {
		return destroy(err)
	}
	bf, err := c.bfreg(resp.BfregIndex)
	if err != nil {
		return destroy(err)
	}
	q.handle, q.qpn, q.bfIdx = r.Handle, r.QPN, resp.BfregIndex
	if err := q.initRings(l, a.SigAll, bf); err != nil {
		return destroy(err)
	}
	scq.attach(q)
	if rcq != scq {
		rcq.attach(q)
	}
	c.mu.Lock()
	c.qpByID[q.id] = q
	c.mu.Unlock()
	return q, nil
}

// Modify is ibv_modify_qp. On a transition to RESET the QP's rings are reset and its
// unpolled completions removed from its CQs, as libmlx5 does, so the QP can be reused.
func (q *QP) Modify(a *verbs.QPAttr, mask verbs.QPAttrMask) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	ua := toUverbsQPAttr(a)
	if err := uverbs.ModifyQP(q.ctx.f, q.handle, &ua, uint32(mask), nil); err != nil {
		return opError(fmt.Sprintf("modify qp %#x", q.qpn), err)
	}
	if mask&verbs.QPAttrState != 0 {
		to := a.State
		if to == verbs.QPStateReset && !q.detached.Load() {
			q.cleanCQs()
			q.resetIndices()
		}
		q.state.Store(uint32(to))
	}
	return nil
}

// Query is ibv_query_qp; it also refreshes the state the data path checks (a QP the NIC moved
// to ERR is seen as such afterwards). It holds q.mu as Modify does: a query answered before a
// concurrent Modify and stored after it would leave the data path with the state before (a
// QP in RTS taken for RTR, its posts refused).
func (q *QP) Query(mask verbs.QPAttrMask) (verbs.QPAttr, error) { return q.query(mask, true) }

// QueryOnly is Query without the refresh: for a layer above that owns the QP's state and
// learns of its failures from completions and events (failover: the application's
// ibv_query_qp must not move what SHIFT's transitions read).
func (q *QP) QueryOnly(mask verbs.QPAttrMask) (verbs.QPAttr, error) { return q.query(mask, false) }

func (q *QP) query(mask verbs.QPAttrMask, refresh bool) (verbs.QPAttr, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ua, err := uverbs.QueryQP(q.ctx.f, q.handle, uint32(mask|verbs.QPAttrState), nil)
	if err != nil {
		return verbs.QPAttr{}, opError(fmt.Sprintf("query qp %#x", q.qpn), err)
	}
	if refresh {
		q.state.Store(uint32(ua.State))
	}
	return fromUverbsQPAttr(&ua), nil
}

// Reset moves the QP to RESET for reuse (see Modify).
func (q *QP) Reset() error {
	return q.Modify(&verbs.QPAttr{State: verbs.QPStateReset}, verbs.QPAttrState)
}

// Destroy is ibv_destroy_qp: the kernel object goes first, then the CQs forget the QP (its
// unpolled completions removed) and the rings are freed.
func (q *QP) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead.Load() {
		return nil
	}
	if err := q.ctx.cmdDestroyQP(q.handle); err != nil {
		return opError(fmt.Sprintf("destroy qp %#x", q.qpn), err)
	}
	// Posts check the state before touching the rings: RESET stops them, dead names why.
	q.state.Store(uint32(verbs.QPStateReset))
	q.dead.Store(true)
	if !q.detached.Load() {
		q.cleanCQs()
	}
	q.recvCQ.detach(q)
	if q.sendCQ != q.recvCQ {
		q.sendCQ.detach(q)
	}
	q.ctx.mu.Lock()
	delete(q.ctx.qpByID, q.id)
	q.ctx.mu.Unlock()
	q.ctx.freeUserIndex(q.uidx)
	q.mem.Free()
	q.dbMem.Free()
	return nil
}

// cleanCQs removes the QP's unpolled completions from its CQs (__mlx5_cq_clean), except from
// CQs an outside data path owns (their owner cleans them).
func (q *QP) cleanCQs() {
	if !q.recvCQ.detached.Load() {
		q.recvCQ.ring.clean(q.qpn)
	}
	if q.sendCQ != q.recvCQ && !q.sendCQ.detached.Load() {
		q.sendCQ.ring.clean(q.qpn)
	}
}
