package failover

import (
	"slices"

	"github.com/shift-rdma/shift/provider/verbs"
)

// The backup log (bkLog) keeps the application's WRs posted on the backup QP in use until
// they complete, for the next backup should this one fail. Its records own copies of their
// SGLs and inline payloads (the application may reuse its own as soon as the post returns);
// the buffers of retired records are kept for the next posts (bkFreeSGL, bkFreeInl, under
// fifoMu), so that a post on the backup allocates nothing once the log has reached the
// application's depth. Records taken out of the log whole (a chained repost, a recovery) take
// their buffers with them.

// A WR is logged, and the kind of its completion pushed (sendKinds), before it is posted, in
// one fifoMu section: once posted, the NIC may complete it and a poller retire it from the
// log before the poster's next instruction. Logged after the post, such a WR stayed in the
// log after its completion, and the next backup's failure would have run it again. A post
// that fails takes back what it pushed from the tails (pollers pop from the heads meanwhile).

// backupPush is what a post pushed: lengths when it began (beginPush), counts pushed once
// it ended (endPush); and the two-sided count before it.
type backupPush struct {
	kinds, held, log int
	two              uint32
}

func (q *QP) beginPush(bs *bkSet) backupPush {
	return backupPush{kinds: len(bs.sendKinds), held: len(bs.heldOps), log: len(q.bkLog), two: q.twoSided}
}

func (q *QP) endPush(bs *bkSet, p *backupPush) {
	p.kinds = len(bs.sendKinds) - p.kinds
	p.held = len(bs.heldOps) - p.held
	p.log = len(q.bkLog) - p.log
}

// rollbackFifo takes back the pushes p of a post that failed (fifoMu).
func (q *QP) rollbackFifo(bs *bkSet, p backupPush) {
	bs.sendKinds = bs.sendKinds[:len(bs.sendKinds)-p.kinds]
	bs.heldOps = bs.heldOps[:len(bs.heldOps)-p.held]
	tail := len(q.bkLog) - p.log
	q.freeRecs(q.bkLog[tail:])
	clear(q.bkLog[tail:])
	q.bkLog = q.bkLog[:tail]
	q.twoSided = p.two
}

// logBackupFifo appends wrs, about to be posted on the backup QP, to the backup log and
// counts the two-sided ones (fifoMu).
func (q *QP) logBackupFifo(wrs []verbs.SendWR) {
	for _, w := range wrs {
		r := sendRec{wr: w, twoSeq: q.twoSided, twoSided: twoSided(w.Opcode),
			signaled: q.sigAll || w.Flags&verbs.SendSignaled != 0}
		if w.Flags&verbs.SendInline != 0 {
			data := popFree(&q.bkFreeInl)
			for _, s := range w.SGL {
				data = append(data, memAt(s.Addr, int(s.Length))...)
			}
			r.inline = data
			r.wr.SGL = nil
			if len(data) > 0 {
				r.wr.SGL = append(popFree(&q.bkFreeSGL), verbs.SGE{Addr: sliceAddr(data), Length: uint32(len(data))})
			}
		} else if len(w.SGL) > 0 {
			r.wr.SGL = append(popFree(&q.bkFreeSGL), w.SGL...)
		}
		if r.twoSided {
			q.twoSided++
		}
		q.bkLog = append(q.bkLog, r)
	}
}

// reserveLogLocked makes room, in one allocation each, for a round's repost of n WRs to be
// logged (logBackupFifo) and their kinds recorded: the log's records, the kinds, and a
// gather list buffer for each record beyond the free ones (sgl(i): the i-th WR's list
// length). A fallback reserves for its ring's WRs after the notification, while the peer
// answers, and again for what it reposts (what was posted during the handshake too). A
// QP's first fallback found them all empty and grew them append by append, WR by WR,
// inside its repost, where SHIFT's work around the posts came to 0.6–1.2 µs a WR with 32
// WRs reposted (BenchmarkFallbackLatency, 2026-11-30).
func (q *QP) reserveLogLocked(n int, sgl func(i int) int) {
	bs := q.cs()
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	q.bkLog = slices.Grow(q.bkLog, n)
	bs.sendKinds = slices.Grow(bs.sendKinds, n)
	// Each buffer fits its WR (inline data takes one entry); a later WR with a longer list
	// grows the buffer it gets.
	if short := n - len(q.bkFreeSGL); short > 0 {
		total := 0
		for i := range short {
			total += max(sgl(i), 1)
		}
		arena := make([]verbs.SGE, total)
		q.bkFreeSGL = slices.Grow(q.bkFreeSGL, short)
		for i := short - 1; i >= 0; i-- { // popFree takes the last first
			k := max(sgl(i), 1)
			q.bkFreeSGL = append(q.bkFreeSGL, arena[:0:k])
			arena = arena[k:]
		}
	}
}

// retireBkLog drops the backup log up to its first signaled WR, whose completion came, and
// keeps the dropped records' buffers.
func (q *QP) retireBkLog() {
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	for i := range q.bkLog {
		if q.bkLog[i].signaled {
			q.freeRecs(q.bkLog[:i+1])
			n := copy(q.bkLog, q.bkLog[i+1:])
			clear(q.bkLog[n:])
			q.bkLog = q.bkLog[:n]
			return
		}
	}
}

// retireBkLogTo drops the backup log up to the first record of wr_id id: the send whose
// error completion the application gets from the set the QP gave up on (and those before it,
// which completed unsignaled), so that the set's flush after its device died
// (flushDeadSetLocked) does not complete it again. With wr_ids repeated among the records
// the first of them is taken (fifoMu).
func (q *QP) retireBkLogTo(id uint64) {
	for i := range q.bkLog {
		if q.bkLog[i].wr.WRID == id {
			q.freeRecs(q.bkLog[:i+1])
			n := copy(q.bkLog, q.bkLog[i+1:])
			clear(q.bkLog[n:])
			q.bkLog = q.bkLog[:n]
			return
		}
	}
}

// freeRecs keeps the buffers of records leaving the log (fifoMu).
func (q *QP) freeRecs(recs []sendRec) {
	for j := range recs {
		r := &recs[j]
		if r.wr.SGL != nil {
			q.bkFreeSGL = append(q.bkFreeSGL, r.wr.SGL[:0])
		}
		if r.inline != nil {
			q.bkFreeInl = append(q.bkFreeInl, r.inline[:0])
		}
	}
}

// popFree returns the last buffer of a free list (emptied), or nil (fifoMu).
func popFree[T any](free *[][]T) []T {
	n := len(*free)
	if n == 0 {
		return nil
	}
	b := (*free)[n-1]
	(*free)[n-1] = nil
	*free = (*free)[:n-1]
	return b
}
