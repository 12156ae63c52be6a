package nic

import (
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

// popRecv consumes the next posted receive WQE: software posts receives by writing the WQE
// and advancing the receive counter of the doorbell record (no UAR doorbell, as mlx5 does),
// so the device compares that counter with its own consumer index. Each WQE is a list of data
// segments ended by MLX5_INVALID_LKEY or by the end of the stride.
func (q *QP) popRecv() (rc.Recv, bool) {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if q.rqN == 0 || q.badRecv != nil {
		return rc.Recv{}, false
	}
	pi := q.dbrec.recvCounter()
	if pi == q.rqCI {
		return rc.Recv{}, false
	}
	r := rc.Recv{Index: q.rqCI}
	n, err := q.rqRing.parse(uint32(q.rqCI), q.rsegs[:])
	st := mlx5.WCLocQPOpErr
	if err == nil && (q.maxRecvSGE == 0 || n <= q.maxRecvSGE) {
		st = mlx5.WCSuccess
		r.Scatter = make([][]byte, 0, n)
		for i := 0; i < n; i++ {
			d := &q.rsegs[i]
			l := d.byteCount
			if l == 0 {
				l = maxMessage
			}
			b, ok := q.dev.localAccess(q.pd, d.lkey, d.addr, l, true)
			if !ok {
				st = mlx5.WCLocProtErr
				break
			}
			r.Scatter = append(r.Scatter, b)
		}
	}
	if st != mlx5.WCSuccess {
		// A receive the device cannot scatter into completes with a local error and the QP
		// goes to ERR. That must happen outside the engine's lock, so the device defers it
		// to the watcher and answers "no receive" to the engine meanwhile.
		q.badRecv = &localCompletion{index: q.rqCI, status: st, receive: true}
		q.dev.kick(q)
		return rc.Recv{}, false
	}
	q.rqCI++
	return r, true
}

// recvErrorLocked completes a receive WQE popRecv could not use and moves the QP to ERR.
func (q *QP) recvErrorLocked() {
	q.rqMu.Lock()
	bad := q.badRecv
	if bad != nil {
		q.badRecv = nil
		q.rqCI++
	}
	q.rqMu.Unlock()
	if bad == nil {
		return
	}
	q.writeCQE(true, 0, bad.index, bad.status, 0)
	if q.State() != QPSErr {
		q.enterErrorLocked(bad.status)
	}
}

// pendingRecv reports whether software posted receives the device has not consumed.
func (q *QP) pendingRecv() bool {
	if q.rqN == 0 {
		return false
	}
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	return q.dbrec.recvCounter() != q.rqCI
}

// watchErr adds q to the QPs whose receive queue the watcher flushes: in ERR every receive
// software posts completes at once with a flush error.
func (d *Device) watchErr(q *QP) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	for _, e := range d.errQPs {
		if e == q {
			return
		}
	}
	d.errQPs = append(d.errQPs, q)
	d.errCount.Store(int32(len(d.errQPs)))
}

// unwatchErr removes q from the flushed QPs.
func (d *Device) unwatchErr(q *QP) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	for i, e := range d.errQPs {
		if e == q {
			d.errQPs = append(d.errQPs[:i], d.errQPs[i+1:]...)
			break
		}
	}
	d.errCount.Store(int32(len(d.errQPs)))
}

// flushErrRecvs flushes receives posted to QPs in ERR; it reports whether it did anything.
func (d *Device) flushErrRecvs() bool {
	if d.errCount.Load() == 0 {
		return false
	}
	d.errMu.Lock()
	list := append(d.errScratch[:0], d.errQPs...)
	d.errMu.Unlock()
	did := false
	for i, q := range list {
		// The gate keeps Destroy (and RESET) from returning while the doorbell record is
		// read here, and keeps this from reading it after they returned.
		if q.gate.enter() {
			if q.State() == QPSErr && q.pendingRecv() {
				q.tr.FlushRecv()
				did = true
			}
			q.gate.exit()
		}
		list[i] = nil
	}
	d.errScratch = list[:0]
	return did
}
