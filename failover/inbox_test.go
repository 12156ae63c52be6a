package failover

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestPostsWhileTransitionHoldsQP: while a transition holds q.mu (taken here by the test, as
// a round in the kernel would hold it), the application's PostSend and PostRecv on the QP's
// slow path return at once: their WRs wait in the inbox (inbox.go) and the engine posts them
// once q.mu is free, in order, behind nothing and before the posts that follow, inline
// payloads as posted.
func TestPostsWhileTransitionHoldsQP(t *testing.T) {
	e, a, b := fallenBack(t)
	ha, hb := e.hosts[0], e.hosts[1]
	const n, size = 12, 48
	recv := func(id uint64) error {
		return b.PostRecv([]verbs.RecvWR{{WRID: id, SGL: []verbs.SGE{hb.mr.SGE(8192+int(id)*64, 64)}}})
	}
	src := ha.buf.Bytes()[:size]
	send := func(id uint64) error {
		payload(src, 31, id)
		err := a.PostSend([]verbs.SendWR{{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
			SGL: []verbs.SGE{{Addr: ha.mr.Addr(), Length: size}}}})
		clear(src) // an inline WR's buffer is the application's again
		return err
	}
	// Receives first, on B with its mutex held; then the sends, on A with its mutex held.
	b.mu.Lock()
	promptly(t, "PostRecv with the QP's mutex held", func() error {
		for id := range uint64(n) {
			if err := recv(id); err != nil {
				return err
			}
		}
		return nil
	}, b.mu.Unlock)
	got := b.box.nRecv.Load()
	b.mu.Unlock()
	if got != n {
		t.Fatalf("%d receives in the inbox, want %d", got, n)
	}
	a.mu.Lock()
	promptly(t, "PostSend with the QP's mutex held", func() error {
		for id := range uint64(n / 2) {
			if err := send(id); err != nil {
				return err
			}
		}
		return nil
	}, a.mu.Unlock)
	got = a.box.nSend.Load()
	a.mu.Unlock()
	if got != n/2 {
		t.Fatalf("%d sends in the inbox, want %d", got, n/2)
	}
	// The rest right away: behind those, wherever the engine has got to.
	for id := uint64(n / 2); id < n; id++ {
		if err := send(id); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range waitN(t, ha.cq, n) {
		if w.WRID != uint64(i) || w.Status != verbs.WCSuccess {
			t.Fatalf("send completion %d: %+v", i, w)
		}
	}
	want := make([]byte, size)
	for i, w := range waitN(t, hb.cq, n) {
		payload(want, 31, uint64(i))
		got := hb.buf.Bytes()[8192+i*64 : 8192+i*64+size]
		if w.WRID != uint64(i) || w.Status != verbs.WCSuccess || !bytes.Equal(got, want) {
			t.Fatalf("receive %d: %+v, data as posted %v", i, w, bytes.Equal(got, want))
		}
	}
	waitFor(t, "the inboxes drained", func() bool { return a.box.nSend.Load() == 0 && b.box.nRecv.Load() == 0 },
		func() string { return e.describe(a, b) })
	if st, rs := a.SendState(), b.RecvState(); st != SendFallback || rs != RecvFallback {
		t.Fatalf("states %v/%v, want both Fallback", st, rs)
	}
}

// TestPostFallsBackFirst: a send or a receive posted while its default QP went to ERR unseen
// (the NIC failed it; no completion polled yet) makes SHIFT fall the QP back before it posts
// the WR, which then runs on the backup: the application sees no error and does not wait for
// the round. On the fast path with the engine busy (a send used to wait for the engine's
// fallback, a receive got ErrQPState), on the slow path taking q.mu itself (both got
// ErrQPState once), and on the slow path finding q.mu held (the engine drains the inbox; the
// WR would complete with a flush error).
func TestPostFallsBackFirst(t *testing.T) {
	for _, tc := range []struct {
		name             string
		slow, held, recv bool
	}{
		{"send/fast", false, false, false}, {"send/locked", true, false, false}, {"send/inbox", true, true, false},
		{"recv/fast", false, false, true}, {"recv/locked", true, false, true}, {"recv/inbox", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, 256, func(_ int, o *Options) { o.ProbeInterval = time.Hour })
			as, bs := e.pairs(t, 1, verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1})
			a, b := as[0], bs[0]
			ha, hb := e.hosts[0], e.hosts[1]
			// The send crosses from src to dst: a to b, or b to a when a's post is the
			// receive.
			src, dst, hs, hd := a, b, ha, hb
			if tc.recv {
				src, dst, hs, hd = b, a, hb, ha
			}
			recv := func() error {
				return dst.PostRecv([]verbs.RecvWR{{WRID: 5, SGL: []verbs.SGE{hd.mr.SGE(4096, 64)}}})
			}
			send := func() error {
				return src.PostSend([]verbs.SendWR{{WRID: 9, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{hs.mr.SGE(0, 64)}}})
			}
			post := send
			if tc.recv {
				post = recv
			} else if err := recv(); err != nil {
				t.Fatal(err)
			}
			a.mu.Lock()
			if tc.slow {
				a.markSlowLocked() // the slow path, as once a QP fell back and came back
			}
			err := a.def.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState)
			if !tc.held || err != nil {
				a.mu.Unlock()
			}
			if err != nil {
				t.Fatal(err)
			}
			// The engine is busy with other work: a post that waited for it would wait for
			// that too.
			busy := make(chan struct{})
			var once sync.Once
			release := func() {
				once.Do(func() {
					close(busy)
					if tc.held {
						a.mu.Unlock()
					}
				})
			}
			t.Cleanup(release)
			a.c.eng.do(func() { <-busy })
			promptly(t, "a post on a default QP in ERR", post, release)
			release()
			if tc.recv {
				// b sends once both sides moved: sent earlier, on b's default QP, it would
				// wait for b's retry timer.
				waitFor(t, "both QPs on the backup", func() bool { return a.RecvState() == RecvFallback && b.SendState() == SendFallback },
					func() string { return e.describe(a, b) })
				if err := send(); err != nil {
					t.Fatal(err)
				}
			}
			if w := waitN(t, hs.cq, 1); w[0].WRID != 9 || w[0].Status != verbs.WCSuccess {
				t.Fatalf("send completion %+v; %s", w[0], e.describe(a, b))
			}
			if w := waitN(t, hd.cq, 1); w[0].WRID != 5 || w[0].Status != verbs.WCSuccess {
				t.Fatalf("receive completion %+v; %s", w[0], e.describe(a, b))
			}
			// A's send side ends its handshake once B's reply is in, which may come after the
			// messages above (they do not wait for it).
			waitFor(t, "A's QP on the backup", func() bool { return a.SendState() == SendFallback && a.RecvState() == RecvFallback },
				func() string { return e.describe(a, b) })
		})
	}
}
