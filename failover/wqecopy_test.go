package failover

import "testing"

// The list of the default ring's WQEs is kept for the next listing only while the ring is as
// it was: a new first position to repost from, a new two-sided offset, or another set of
// outstanding WQEs lists it again.
func TestDefsKeptKey(t *testing.T) {
	q, ha, hb := hungPair(t)
	post := func(id uint64) { t.Helper(); hungPost(t, q, ha, hb, id, id%2 == 0) }
	for id := range uint64(4) {
		post(id)
	}
	list := func() []sendRec {
		t.Helper()
		q.mu.Lock()
		defer q.mu.Unlock()
		l, err := q.defSendsLocked()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l1, l2 := list(), list()
	if len(l1) != 4 || &l1[0] != &l2[0] {
		t.Fatalf("%d WQEs listed; the second listing kept: %v", len(l1), len(l2) > 0 && &l1[0] == &l2[0])
	}
	// A later first position: nothing before it is SHIFT's to repost.
	q.mu.Lock()
	from := q.defFrom
	q.defFrom = l1[2].pos
	q.mu.Unlock()
	if l := list(); len(l) != 2 || l[0].wr.WRID != 2 {
		t.Fatalf("from position %d: %d WQEs listed, first %+v", l1[2].pos, len(l), l)
	}
	q.mu.Lock()
	q.defFrom = from
	q.twoOff += 5 // the two-sided count's offset moved
	q.mu.Unlock()
	if l := list(); len(l) != 4 || l[1].twoSeq != l1[1].twoSeq+5 {
		t.Fatalf("offset moved: %d WQEs listed, twoSeq %d, was %d", len(l), l[1].twoSeq, l1[1].twoSeq)
	}
	post(4) // one more outstanding
	if l := list(); len(l) != 5 || l[4].wr.WRID != 4 {
		t.Fatalf("a WQE more: %d listed", len(l))
	}
}
