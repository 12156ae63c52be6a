package failover

// QueueSizes returns the capacity of each of the QP's queues and logs that grow with the
// application's work and shrink as it completes, by name. The deterministic simulation
// (internal/sim) checks that none outgrows a bound derived from the QP's SQ and RQ depth:
// memory stays bounded whatever the faults and however long the QP lives. It takes the QP's
// locks; it is for tests and diagnostics, not the data path.
func (q *QP) QueueSizes() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := map[string]int{"bkLog": cap(q.bkLog), "pending": cap(q.pending),
		"outSends": cap(q.outSends), "outRecvs": cap(q.outRecvs)}
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	m["errWCs"] = cap(q.errWCs)
	m["dSendKinds"] = cap(q.dSendKinds)
	m["dRecvKinds"] = cap(q.dRecvKinds)
	for _, bs := range q.sets {
		m["set.sendKinds"] = max(m["set.sendKinds"], cap(bs.sendKinds))
		m["set.recvKinds"] = max(m["set.recvKinds"], cap(bs.recvKinds))
		m["set.heldOps"] = max(m["set.heldOps"], cap(bs.heldOps))
		m["set.stash"] = max(m["set.stash"], cap(bs.stash))
	}
	return m
}

// QueueSizes returns the capacity of each of the CQ's queues by name (see QP.QueueSizes): the
// completions buffered for the application and the QPs and events waiting for the engine.
func (cq *CQ) QueueSizes() map[string]int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return map[string]int{"buf": cap(cq.buf), "scratch": cap(cq.scratch), "toFail": cap(cq.toFail),
		"toFailBk": cap(cq.toFailBk), "recov": cap(cq.recov), "drained": cap(cq.drained), "neverSent": cap(cq.neverSent)}
}
