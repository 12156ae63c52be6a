package failover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider/verbs"
)

// refreshMRs makes c's cache of the peer's MR entries list them again now (what the shadow
// goroutine does every mrRefresh).
func refreshMRs(t testing.TB, c *Context, peer [16]byte) {
	t.Helper()
	ctx, cancel := c.kvCtx()
	defer cancel()
	for _, b := range c.bks {
		if listed, err := b.listPeer(ctx, peer); err != nil || !listed {
			t.Fatalf("list the peer's MR entries: %v (listed %v)", err, listed)
		}
	}
}

// dropMRs empties c's caches of the peers' MR entries (entries never read before a failure).
func dropMRs(c *Context) {
	for _, b := range c.bks {
		b.rkeys.Clear()
	}
}

// slowKV wraps the test's Mem: Get and List take delay, and hang while blocked until released
// (or their context ends); both are counted.
type slowKV struct {
	*kv.Mem
	delay       time.Duration
	blocked     atomic.Bool
	release     chan struct{}
	releaseOnce sync.Once
	gets, lists atomic.Int64
}

func newSlowKV() *slowKV { return &slowKV{release: make(chan struct{})} }

func (s *slowKV) unblock() { s.releaseOnce.Do(func() { close(s.release) }) }

func (s *slowKV) wait(ctx context.Context) error {
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("slow kv: %w: %w", kv.ErrUnavailable, ctx.Err())
		}
	}
	if s.blocked.Load() {
		select {
		case <-s.release:
		case <-ctx.Done():
			return fmt.Errorf("slow kv: %w: %w", kv.ErrUnavailable, ctx.Err())
		}
	}
	return nil
}

func (s *slowKV) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Mem.Get(ctx, key)
}

func (s *slowKV) List(ctx context.Context, prefix string) ([]kv.Entry, error) {
	s.lists.Add(1)
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Mem.List(ctx, prefix)
}

// envSlowKV is an environment whose hosts share a slowKV over the test's Mem.
func envSlowKV(t *testing.T, kvTimeout time.Duration) (*testEnv, *slowKV) {
	s := newSlowKV()
	e := newEnvWith(t, 256, func(h int, o *Options) {
		if h == 0 { // before any goroutine of the hosts reads it
			s.Mem = o.KV.(*kv.Mem)
		}
		o.KV = s
		o.KVTimeout = kvTimeout
	})
	t.Cleanup(s.unblock) // before the contexts close (cleanups run last first)
	return e, s
}

// newPeerMR registers 1 MiB of hb's buffer at off, waits until its entry is published, and
// checks that ha's cache does not hold it yet (no listing since: the test stops them).
func newPeerMR(t *testing.T, ha, hb *testHost, off int) *MR {
	t.Helper()
	m, err := as[*MR](hb.pd.RegMR(hb.buf.Bytes()[off:off+1<<20], verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Dereg() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hb.ctx.WaitShadow(ctx); err != nil { // published
		t.Fatal(err)
	}
	if ha.ctx.bks[0].cachedRKey(rkeyKey{hb.gid, m.RKey()}) {
		t.Fatal("the new MR is cached already")
	}
	return m
}

// writeWR is a signaled WRITE of n bytes from ha's buffer at off to the peer's MR m at off.
func writeWR(id uint64, ha *testHost, m *MR, off, n int) verbs.SendWR {
	return verbs.SendWR{WRID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(off, n)},
		RemoteAddr: m.Addr() + uint64(off), RKey: m.RKey()}
}

// The peer's entries are cached when the QP connects: a fallback whose store hangs completes
// its repost without reading the store (no Get from the failure to the completion), while
// the store is still hanging.
func TestFallbackUsesCachedMREntries(t *testing.T) {
	e, s := envSlowKV(t, 30*time.Second)
	a, _ := e.pairs(t, 1, smallCap)
	qa, ha, hb := a[0], e.hosts[0], e.hosts[1]
	if !ha.ctx.bks[0].cachedRKey(rkeyKey{hb.gid, hb.mr.RKey()}) {
		t.Fatal("the peer's MR entry was not cached when the QP connected")
	}
	s.blocked.Store(true)
	gets := s.gets.Load()
	payload(ha.buf.Bytes()[:4096], 21, 0)
	e.linkDown(0)
	start := time.Now()
	for i := range 4 {
		if err := qa.PostSend([]verbs.SendWR{writeWR(uint64(10+i), ha, hb.mr, i*1024, 1024)}); err != nil {
			t.Fatal(err)
		}
	}
	ws := waitN(t, ha.cq, 4)
	took := time.Since(start)
	for i, w := range ws {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(10+i) {
			t.Fatalf("completion %d: %+v (err %v)", i, w, qa.Err())
		}
	}
	if qa.SendState() != SendFallback {
		t.Fatalf("state %v", qa.SendState())
	}
	if n := s.gets.Load() - gets; n != 0 {
		t.Fatalf("%d Gets from the failure to the repost's completions: the fallback read the store", n)
	}
	for _, h := range e.hosts {
		if st := h.ctx.Stats(); st.KVWaits != 0 {
			t.Fatalf("stats %+v: a round or post waited for the store", st)
		}
	}
	if !bytes.Equal(hb.buf.Bytes()[:4096], ha.buf.Bytes()[:4096]) {
		t.Fatal("the reposted WRITEs did not land")
	}
	t.Logf("fallback and repost of 4 WRITEs in %v with the store hanging (%d listings waiting)", took.Round(time.Microsecond), s.lists.Load())
}

// An MR the peer registered just before the failure, not listed yet: the round finds its key
// missing, reads it with the QP's mutex released, and reposts; a key first used on the
// backup is read the same way by the post.
func TestFallbackFetchesNewPeerMR(t *testing.T) {
	e := newEnv(t, 256)
	for _, h := range e.hosts {
		h.ctx.mrRefresh.Store(int64(time.Hour)) // no listing after the connection
	}
	a, _ := e.pairs(t, 1, smallCap)
	qa, ha, hb := a[0], e.hosts[0], e.hosts[1]
	m2 := newPeerMR(t, ha, hb, 1<<20)
	payload(ha.buf.Bytes()[:2048], 22, 0)
	e.linkDown(0)
	if err := qa.PostSend([]verbs.SendWR{writeWR(30, ha, m2, 0, 1024)}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 30 {
		t.Fatalf("completion %+v (err %v)", w, qa.Err())
	}
	st := ha.ctx.Stats()
	if qa.SendState() != SendFallback || st.KVWaits == 0 {
		t.Fatalf("state %v, stats %+v: want the fallback done after reading the entry", qa.SendState(), st)
	}
	if !bytes.Equal(m2.Bytes()[:1024], ha.buf.Bytes()[:1024]) {
		t.Fatal("the WRITE to the new MR did not land")
	}
	// On the backup: an MR registered now is read by the post.
	m3 := newPeerMR(t, ha, hb, 2<<20)
	if err := qa.PostSend([]verbs.SendWR{writeWR(31, ha, m3, 1024, 1024)}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 31 {
		t.Fatalf("completion %+v (err %v)", w, qa.Err())
	}
	if !bytes.Equal(m3.Bytes()[1024:2048], ha.buf.Bytes()[1024:2048]) {
		t.Fatal("the WRITE to the MR registered on the backup did not land")
	}
	if n := ha.ctx.Stats().KVWaits; n != st.KVWaits+1 {
		t.Fatalf("KVWaits %d after the post, want %d", n, st.KVWaits+1)
	}
	t.Logf("stats: %d reads of missing entries, %v in all", ha.ctx.Stats().KVWaits, ha.ctx.Stats().KVWait)
}

// A key missing from the cache while the store is down: the round fails closed and the
// error names the key.
func TestFallbackMissStoreDownFailsClosed(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa, ha, hb := a[0], e.hosts[0], e.hosts[1]
	m, err := as[*MR](hb.pd.RegMR(hb.buf.Bytes()[1<<20:2<<20], verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hb.ctx.WaitShadow(ctx); err != nil {
		t.Fatal(err)
	}
	e.kv.SetDown(true)
	e.linkDown(0)
	if err := qa.PostSend([]verbs.SendWR{writeWR(40, ha, m, 0, 64)}); err != nil {
		t.Fatal(err)
	}
	w := waitN(t, ha.cq, 1)[0]
	if w.Status != verbs.WCRetryExcErr || w.WRID != 40 {
		t.Fatalf("completion %+v", w)
	}
	err = qa.Err()
	if qa.SendState() != SendFailed || !errors.Is(err, ErrBackupNotReady) || !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("state %v, err %v: want Failed, ErrBackupNotReady and kv.ErrUnavailable", qa.SendState(), err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%#x", m.RKey())) {
		t.Fatalf("err %v does not name rkey %#x", err, m.RKey())
	}
	if st := ha.ctx.Stats(); st.Refused != 1 || st.KVWaits != 1 {
		t.Fatalf("stats %+v: want one refusal after one read", st)
	}
}

// The cache answers for a peer's entries by backup index: entries of other indexes under the
// same prefix, or keys that are not entries, are ignored.
func TestParseMRKey(t *testing.T) {
	for _, c := range []struct {
		rest string
		idx  int
		rkey uint32
		ok   bool
	}{
		{"291", 0, 291, true}, {"291/b1", 1, 291, true}, {"291/b1", 0, 0, false}, {"291", 1, 0, false},
		{"0291", 0, 0, false}, {"x", 0, 0, false}, {"4294967296", 0, 0, false}, {"", 0, 0, false},
	} {
		rkey, ok := parseMRKey(c.rest, c.idx)
		if ok != c.ok || rkey != c.rkey {
			t.Errorf("parseMRKey(%q, %d) = %d %v, want %d %v", c.rest, c.idx, rkey, ok, c.rkey, c.ok)
		}
	}
}
