package provider

import "github.com/shift-rdma/shift/provider/verbs"

// PostSend posts a list of send WRs with one doorbell (ibv_post_send). The whole list is
// validated first — QP state, SQ room, SGE count, inline size, opcode — and on any error
// nothing is written and a *verbs.WRError names the WR and the limit. It allocates nothing
// and takes no lock; calls on one QP must not run concurrently (as with one libmlx5 sq.lock).
func (q *QP) PostSend(wrs []verbs.SendWR) error { return q.postSend(wrs, false) }

// PostSendInternal is PostSend for the layer above the provider's own WRs (SHIFT's probe
// and notification): they may use the slots ReserveSend kept back from the application.
func (q *QP) PostSendInternal(wrs []verbs.SendWR) error { return q.postSend(wrs, true) }

func (q *QP) postSend(wrs []verbs.SendWR, internal bool) error {
	if len(wrs) == 0 {
		return nil
	}
	if err := q.checkSend(wrs, internal); err != nil {
		return err
	}
	last, inl := q.sq.write(wrs, internal)
	q.ringSQ(len(wrs), last, inl)
	return nil
}

func (q *QP) checkSend(wrs []verbs.SendWR, internal bool) error {
	if st := q.State(); !canSend(st) {
		return &verbs.WRError{Op: "post_send", Index: 0, Err: q.stateErr()}
	}
	if q.sq == nil || q.sq.wqeCnt == 0 {
		return &verbs.WRError{Op: "post_send", Index: 0, Err: verbs.ErrSQFull}
	}
	return q.sq.validate(wrs, internal)
}

// PostRecv posts receive WRs (ibv_post_recv): validated as a whole, then written and published
// with one doorbell-record update. It allocates nothing and takes no lock.
func (q *QP) PostRecv(wrs []verbs.RecvWR) error { return q.postRecv(wrs, false) }

// PostRecvInternal is PostRecv for the layer above the provider's own receives (SHIFT's
// control RECV on the default QP): they may use the slots ReserveRecv kept back.
func (q *QP) PostRecvInternal(wrs []verbs.RecvWR) error { return q.postRecv(wrs, true) }

func (q *QP) postRecv(wrs []verbs.RecvWR, internal bool) error {
	if len(wrs) == 0 {
		return nil
	}
	if st := q.State(); !canRecv(st) {
		return &verbs.WRError{Op: "post_recv", Index: 0, Err: q.stateErr()}
	}
	if q.rq == nil || q.rq.wqeCnt == 0 {
		return &verbs.WRError{Op: "post_recv", Index: 0, Err: verbs.ErrRQFull}
	}
	if err := q.rq.validate(wrs, internal); err != nil {
		return err
	}
	q.rq.write(wrs, internal)
	return nil
}

// ReserveSend and ReserveRecv keep n send (receive) slots of the QP for internal posts: from
// then on the application may have at most Cap().MaxSendWR (MaxRecvWR) WRs outstanding,
// n fewer than the rings hold, and Cap reports that. The layer above calls them once, right
// after creating the QP it sized n larger than the application asked.
func (q *QP) ReserveSend(n uint32) {
	if q.sq != nil && n <= q.sq.maxPost {
		q.sq.reserve = n
		q.cap.MaxSendWR = q.sq.maxPost - n
	}
}

// ReserveRecv is ReserveSend for the receive queue.
func (q *QP) ReserveRecv(n uint32) {
	if q.rq != nil && n <= q.rq.maxPost {
		q.rq.reserve = n
		q.cap.MaxRecvWR = q.rq.maxPost - n
	}
}

// State is the QP state as last set by Modify (an atomic load; the data path checks it).
func (q *QP) State() verbs.QPState { return verbs.QPState(q.state.Load()) }

// stateErr tells a destroyed QP from one in the wrong state (error path only).
func (q *QP) stateErr() error {
	if q.dead.Load() {
		return verbs.ErrClosed
	}
	return verbs.ErrQPState
}
