package failover

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// A post on the backup whose remote key the cache misses returns while the store hangs; the
// posts after it return too and complete after it, in order, once the store answers; the
// data lands (keywait.go). Before, the first post waited for the store on the application's
// thread.
func TestPostMissingKeyLeftToInbox(t *testing.T) {
	e, s := envSlowKV(t, 30*time.Second)
	for _, h := range e.hosts {
		h.ctx.mrRefresh.Store(int64(time.Hour)) // no listing after the connection
	}
	a, _ := e.pairs(t, 1, smallCap)
	qa, ha, hb := a[0], e.hosts[0], e.hosts[1]
	payload(ha.buf.Bytes()[:4096], 23, 0)
	e.linkDown(0)
	// On the backup first, with a cached key.
	if err := qa.PostSend([]verbs.SendWR{writeWR(50, ha, hb.mr, 0, 1024)}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 50 {
		t.Fatalf("completion %+v (err %v)", w, qa.Err())
	}
	if qa.SendState() != SendFallback {
		t.Fatalf("state %v after the first post", qa.SendState())
	}
	m := newPeerMR(t, ha, hb, 1<<20)
	s.blocked.Store(true)
	gets := s.gets.Load()
	// A post naming the new MR, then one naming the cached one: both return at once.
	if err := qa.PostSend([]verbs.SendWR{writeWR(51, ha, m, 1024, 1024)}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend([]verbs.SendWR{writeWR(52, ha, hb.mr, 2048, 1024)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key read to start", func() bool { return s.gets.Load() > gets }, func() string { return "" })
	var wc [4]verbs.WC
	if n, err := ha.cq.Poll(wc[:]); err != nil || n != 0 {
		t.Fatalf("poll while the store hangs: %d completions %+v, err %v", n, wc[:n], err)
	}
	s.blocked.Store(false)
	s.unblock()
	ws := waitN(t, ha.cq, 2)
	for i, w := range ws {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(51+i) {
			t.Fatalf("completion %d: %+v (err %v)", i, w, qa.Err())
		}
	}
	if !bytes.Equal(m.Bytes()[1024:2048], ha.buf.Bytes()[1024:2048]) {
		t.Fatal("the WRITE to the new MR did not land")
	}
	if !bytes.Equal(hb.buf.Bytes()[2048:3072], ha.buf.Bytes()[2048:3072]) {
		t.Fatal("the WRITE queued behind it did not land")
	}
	st := ha.ctx.Stats()
	if st.KVWaits == 0 || st.Inboxed == 0 {
		t.Fatalf("stats %+v: want a read for the inbox", st)
	}
	if qa.SendState() != SendFallback {
		t.Fatalf("state %v", qa.SendState())
	}
}

// A key the store cannot give (down): the post returns, its WR completes with the error a
// failed link gives, and the QP fails closed naming the key, as a round does.
func TestPostMissingKeyStoreDown(t *testing.T) {
	e := newEnv(t, 256)
	for _, h := range e.hosts {
		h.ctx.mrRefresh.Store(int64(time.Hour))
	}
	a, _ := e.pairs(t, 1, smallCap)
	qa, ha, hb := a[0], e.hosts[0], e.hosts[1]
	e.linkDown(0)
	if err := qa.PostSend([]verbs.SendWR{writeWR(60, ha, hb.mr, 0, 64)}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 60 {
		t.Fatalf("completion %+v (err %v)", w, qa.Err())
	}
	m := newPeerMR(t, ha, hb, 1<<20)
	e.kv.SetDown(true)
	if err := qa.PostSend([]verbs.SendWR{writeWR(61, ha, m, 0, 64), writeWR(62, ha, hb.mr, 64, 64)}); err != nil {
		t.Fatalf("post: %v (the store is read off the application's thread)", err)
	}
	ws := waitN(t, ha.cq, 2)
	if ws[0].WRID != 61 || ws[0].Status != verbs.WCRetryExcErr || ws[1].WRID != 62 || ws[1].Status != verbs.WCWRFlushErr {
		t.Fatalf("completions %+v", ws)
	}
	err := qa.Err()
	if qa.SendState() != SendFailed || !errors.Is(err, ErrBackupNotReady) || !strings.Contains(err.Error(), fmt.Sprintf("%#x", m.RKey())) {
		t.Fatalf("state %v, err %v: want Failed, ErrBackupNotReady naming rkey %#x", qa.SendState(), err, m.RKey())
	}
}
