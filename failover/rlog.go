package failover

import "github.com/shift-rdma/shift/provider/verbs"

// The receive log: every application receive posted, in order, with its scatter list, from
// recvDone (the oldest not yet completed) to rPosted, so that a fallback can post the
// outstanding ones on the backup QP and a recovery on the default QP again. Its records and
// scatter entries are fixed arrays (recvRec, rsge) rather than slices of slices, so that a
// poster outside Go (the plugin's C post_recv, ShareRecvGate) can append to it too.

// RecvLogRecord is one logged receive; its scatter list is the log's scatter entries
// [slot*stride, slot*stride+NSGE). Its layout is what a shared poster writes
// (RecvGateShare): 16 bytes, WRID at 0, NSGE at 8.
type RecvLogRecord struct {
	WRID uint64
	NSGE uint32
	_    uint32
}

type recvRec = RecvLogRecord

// initRecvLog sizes the log for twice the application's receive queue.
func (q *QP) initRecvLog() {
	nr := pow2(2 * int(max(q.cap.MaxRecvWR, 1)))
	q.rlog = make([]recvRec, nr)
	q.rmask = uint64(nr - 1)
	q.rstride = max(int(q.cap.MaxRecvSGE), 1)
	q.rsge = make([]verbs.SGE, nr*q.rstride)
}

// logRecv records wr as the receive at log position i. It reports false, recording nothing,
// when wr has more scatter entries than the QP was created with.
func (q *QP) logRecv(i uint64, wr *verbs.RecvWR) bool {
	if len(wr.SGL) > q.rstride {
		return false
	}
	slot := i & q.rmask
	r := &q.rlog[slot]
	r.WRID = wr.WRID
	r.NSGE = uint32(copy(q.rsge[int(slot)*q.rstride:], wr.SGL))
	return true
}

// loggedRecv is the receive at log position i; its scatter list is the log's (callers that
// keep it past the next post on that slot copy it).
func (q *QP) loggedRecv(i uint64) verbs.RecvWR {
	slot := i & q.rmask
	r := &q.rlog[slot]
	k := int(slot) * q.rstride
	return verbs.RecvWR{WRID: r.WRID, SGL: q.rsge[k : k+int(r.NSGE) : k+int(r.NSGE)]}
}
