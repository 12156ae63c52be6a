package provider

import "github.com/shift-rdma/shift/provider/verbs"

// PostSend posts a list of send WRs with one doorbell (ibv_post_send). The whole list is
// validated first — QP state, SQ room, SGE count, inline size, opcode — and on any error
// nothing is written and a *WRError names the WR and the limit. It allocates nothing and
// takes no lock; calls on one QP must not run concurrently (as with one libmlx5 sq.lock).
func (q *QP) PostSend(wrs []verbs.SendWR) error {
	if len(wrs) == 0 {
		return nil
	}
	if err := q.checkSend(wrs); err != nil {
		return err
	}
	last, inl := q.sq.write(wrs)
	q.ringSQ(len(wrs), last, inl)
	return nil
}

func (q *QP) checkSend(wrs []verbs.SendWR) error {
	if st := q.State(); !canSend(st) {
		return &verbs.WRError{Op: "post_send", Index: 0, Err: q.stateErr()}
	}
	if q.sq == nil || q.sq.wqeCnt == 0 {
		return &verbs.WRError{Op: "post_send", Index: 0, Err: verbs.ErrSQFull}
	}
	return q.sq.validate(wrs)
}

// PostRecv posts receive WRs (ibv_post_recv): validated as a whole, then written and published
// with one doorbell-record update. It allocates nothing and takes no lock.
func (q *QP) PostRecv(wrs []verbs.RecvWR) error {
	if len(wrs) == 0 {
		return nil
	}
	if st := q.State(); !canRecv(st) {
		return &verbs.WRError{Op: "post_recv", Index: 0, Err: q.stateErr()}
	}
	if q.rq == nil || q.rq.wqeCnt == 0 {
		return &verbs.WRError{Op: "post_recv", Index: 0, Err: verbs.ErrRQFull}
	}
	if err := q.rq.validate(wrs); err != nil {
		return err
	}
	q.rq.write(wrs)
	return nil
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
