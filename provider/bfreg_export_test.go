package provider

// QPBfreg exposes, to the external tests, the blue-flame register a QP rings: its gross
// index (CreateQPResp.BfregIndex) and whether ringing takes the register's lock.
func QPBfreg(q *QP) (index uint32, needLock bool) {
	return q.sq.bf.Index(), q.sq.bf.NeedLock
}

// BfregRequest exposes bfregRequest for the external tests.
var BfregRequest = bfregRequest
