package failover

import "testing"

// A retransmission check that found every key mapped spares the reply's round its key
// look-up only while it still describes the ring and the keys: a change of the keys or a
// WQE posted since voids it.
func TestKeysCheckedVoided(t *testing.T) {
	q, ha, hb := hungPair(t)
	post := func(id uint64) { t.Helper(); hungPost(t, q, ha, hb, id, true) }
	for id := range uint64(3) {
		post(id)
	}
	check := func() {
		t.Helper()
		q.markSlowLocked() // gates closed, as in a round
		if err := q.checkSendsLocked(); err != nil {
			t.Fatal(err)
		}
	}
	still := func() bool {
		q.defOutstandingLocked()
		return q.keysStillCheckedLocked(q.cs().dev)
	}
	q.mu.Lock()
	check()
	if !still() {
		t.Fatal("not held right after the check")
	}
	q.cs().dev.keyGen.Add(1) // a key mapped or unmapped since
	if still() {
		t.Fatal("held after the keys changed")
	}
	check()
	q.mu.Unlock()
	post(3) // on the locked path: the gates are closed
	q.mu.Lock()
	if still() {
		t.Fatal("held after a WQE was posted")
	}
	q.mu.Unlock()
}
