package failover

import "github.com/shift-rdma/shift/provider/verbs"

// Posts whose remote keys the cache cannot answer for (issue 12 §5). The cache of the peer's
// MR entries (rkcache.go) holds what the last listing found; an MR the peer registered since,
// used for the first time on the backup, misses. Such a post used to read the key from the
// store on the application's thread (q.mu released, up to one KV timeout). Now the post
// leaves its WRs in the inbox (inbox.go) and returns; the engine's drain finds the keys
// missing, hands them to a reader goroutine (keyReader) and drains no send until the read is
// done (keyWait); the reader then queues the drain again, which posts the WRs with what the
// read found. A key still missing then fails the QP closed, as a round that cannot map a key
// does (error completions: the call returned already). Neither the application's thread nor the
// engine waits for the store, and the posts made meanwhile queue behind in the inbox, in
// order. A stepped context (simulations) has no goroutines: its drain reads the keys itself.

// backupKeysMissing appends to miss the remote keys of wrs that a post now would rewrite
// (the send side on the backup: Fallback, WaitSignaled) and the cache cannot answer for
// (q.mu held).
func (q *QP) backupKeysMissing(miss []rkeyKey, wrs []verbs.SendWR) []rkeyKey {
	if st := q.mach.sendState(); st != SendFallback && st != SendWaitSignaled {
		return miss
	}
	bs := q.cs()
	return missingRKeysBy(q.remote.GID, wrs, miss, func(k rkeyKey) bool { return q.km.rkeyKnown(bs.dev, k) })
}

// sendKeysMissLocked reports whether wrs, posted now, name a remote key the cache cannot
// answer for: the post should leave them to the inbox (q.mu held).
func (q *QP) sendKeysMissLocked(wrs []verbs.SendWR) bool {
	return len(q.backupKeysMissing(nil, wrs)) > 0
}

// awaitKeysLocked runs in the drain before it posts recs[0] of a batch taken before any read
// (q.mu held): when the state rewrites remote keys and those of recs miss the cache, it puts
// recs back at the head of the inbox, starts the read and reports true (the drain stops; the
// reader queues it again, and the batch it then takes is posted with what the cache holds,
// without another read: a store that stays down fails the WRs once, it does not loop).
func (q *QP) awaitKeysLocked(recs []sendRec) bool {
	var miss []rkeyKey
	for i := range recs {
		miss = q.backupKeysMissing(miss, []verbs.SendWR{recs[i].wr})
	}
	if len(miss) == 0 {
		return false
	}
	b := &q.box
	bs := q.cs()
	if q.c.eng.stepped {
		// No goroutine to read them: read here (the simulation's store answers at once).
		q.c.fetchFor(bs.dev, miss)
		return false
	}
	b.mu.Lock()
	b.sends = append(append(make([]sendRec, 0, len(recs)+len(b.sends)), recs...), b.sends...)
	b.nSend.Add(int32(len(recs))) // the drain subtracts the whole batch it took
	b.keyWait = true
	b.mu.Unlock()
	q.c.keyWG.Add(1)
	go q.keyReader(bs.dev, miss)
	return true
}

// keyReader reads keys for q's inbox off every lock of the data path, then queues the drain.
func (q *QP) keyReader(dev *backupDev, keys []rkeyKey) {
	defer q.c.keyWG.Done()
	q.c.fetchFor(dev, keys)
	b := &q.box
	b.mu.Lock()
	b.keyWait, b.keysRead = false, true
	q.queueDrainBoxed()
	b.mu.Unlock()
}
