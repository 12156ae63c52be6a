package failover

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// appBound is how long the application's call may take while a round waits: far beyond a
// post or a poll on a loaded machine, far below the round's wait (held until the test ends
// it).
const appBound = 5 * time.Second

// holdDrain makes q's fallback drains wait until release is called; held is closed once a
// drain of q waits.
func holdDrain(t *testing.T, q *QP) (held <-chan struct{}, release func()) {
	var hold atomic.Bool
	hold.Store(true)
	ch := make(chan struct{})
	var once sync.Once
	hook := func(p *QP) bool {
		if p != q || !hold.Load() {
			return false
		}
		once.Do(func() { close(ch) })
		return true
	}
	testHookDrain.Store(&hook)
	t.Cleanup(func() { testHookDrain.Store(nil) })
	return ch, func() { hold.Store(false) }
}

// promptly fails the test unless f returns within appBound and without error; release lets
// f finish (a timeout or an error calls it before failing).
func promptly(t *testing.T, what string, f func() error, release func()) {
	t.Helper()
	err, ok := within(f, release)
	if !ok {
		t.Fatalf("%s waited (more than %v)", what, appBound)
	}
	if err != nil {
		release()
		t.Fatalf("%s: %v", what, err)
	}
}

// within runs f on another goroutine and reports whether it returned within appBound; if not,
// it calls release and waits for f.
func within(f func() error, release func()) (error, bool) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err, true
	case <-time.After(appBound):
		release()
		return <-done, false
	}
}

// roundPair connects one pair that does not recover (the QP stays on the backup for a
// second round) and takes inline data.
func roundPair(t *testing.T) (e *testEnv, qa, qb *QP) {
	e = newEnvWith(t, 256, func(_ int, o *Options) { o.ProbeInterval = time.Hour })
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	a, b := e.pairs(t, 1, cp)
	return e, a[0], b[0]
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestPostsDuringWaitingRound: while a fallback round waits for the default NIC's flushes
// (held back here), the application's PostSend, PostRecv and Poll on that QP's slow path
// return at once: the round waits with the QP's mutex released (roundwait.go). What was
// posted meanwhile is held and delivered exactly once, in order, after what came before.
func TestPostsDuringWaitingRound(t *testing.T) {
	e, qa, qb := roundPair(t)
	ha, hb := e.hosts[0], e.hosts[1]
	const n, size, seed = 8, 1024, 99
	for i := range 3 * n {
		payload(ha.buf.Bytes()[i*slot:i*slot+size], seed, uint64(i))
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{hb.mr.SGE(bufSize/2+i*slot, slot)}}}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(i int) error {
		return qa.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ha.mr.SGE(i*slot, size)}}})
	}
	deadline := time.Now().Add(60 * time.Second)
	sp, rp := &poller{t: t, cq: ha.cq}, &poller{t: t, cq: hb.cq}
	expect := func(p *poller, from, to int, qpn uint32) {
		t.Helper()
		for got := from; got < to; {
			ws := p.next(deadline)
			if ws == nil {
				t.Fatalf("timed out after %d of %d completions", got, to)
			}
			for _, w := range ws {
				if w.Status != verbs.WCSuccess || w.WRID != uint64(got) || w.QPNum != qpn {
					t.Fatalf("completion %d: %+v (%v)", got, w, w.Status)
				}
				if w.Opcode&verbs.WCRecv != 0 {
					if seq := binary.LittleEndian.Uint64(hb.buf.Bytes()[bufSize/2+got*slot:]); seq != uint64(got) {
						t.Fatalf("receive %d holds message %d", got, seq)
					}
				}
				got++
			}
		}
	}
	for i := range n {
		if err := send(i); err != nil {
			t.Fatal(err)
		}
	}
	expect(sp, 0, n, qa.QPN())

	held, release := holdDrain(t, qa)
	defer release()
	// A fallback of the healthy QP, on the engine, as a failure's would run.
	ha.ctx.eng.do(func() { qa.fallback(ctlMsg{}, false) })
	waitClosed(t, held, "the round's drain")

	var wcs [4]verbs.WC
	err, prompt := within(func() error {
		var err error
		for i := n; i < 2*n; i++ {
			err = errors.Join(err, send(i))
		}
		err = errors.Join(err, qa.PostRecv([]verbs.RecvWR{{WRID: 1 << 40, SGL: []verbs.SGE{ha.mr.SGE(bufSize/2, slot)}}}))
		m, perr := ha.cq.Poll(wcs[:])
		if m != 0 {
			perr = errors.Join(perr, errors.New("a completion while nothing was due"))
		}
		return errors.Join(err, perr)
	}, release)
	if !prompt {
		t.Fatalf("the application's posts and poll waited for the fallback round (more than %v)", appBound)
	}
	if err != nil {
		t.Fatal(err)
	}
	release()
	expect(sp, n, 2*n, qa.QPN())
	expect(rp, 0, 2*n, qb.QPN())
	if st, rs := qa.SendState(), qa.RecvState(); st != SendFallback || rs != RecvFallback {
		t.Fatalf("states %v/%v after the round, want Fallback/Fallback", st, rs)
	}

	// A reset round (nothing of ours moves): what is held while it waits is posted on the
	// backup when it ends (flushHeld), sends and receives.
	held, release = holdDrain(t, qa)
	ha.ctx.eng.do(func() { qa.fallback(ctlMsg{}, false) })
	waitClosed(t, held, "the reset round's drain")
	err, prompt = within(func() error {
		var err error
		for i := 2 * n; i < 3*n; i++ {
			err = errors.Join(err, send(i))
		}
		return errors.Join(err, qa.PostRecv([]verbs.RecvWR{{WRID: 1<<40 + 1, SGL: []verbs.SGE{ha.mr.SGE(bufSize/2, slot)}}}))
	}, release)
	if !prompt {
		t.Fatalf("the application's posts waited for the reset round (more than %v)", appBound)
	}
	if err != nil {
		t.Fatal(err)
	}
	release()
	expect(sp, 2*n, 3*n, qa.QPN())
	expect(rp, 2*n, 3*n, qb.QPN())
	// Both receives posted on qa during the rounds take the peer's next two messages.
	for k := range 2 {
		if err := qb.PostSend([]verbs.SendWR{{WRID: uint64(k), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{hb.mr.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for k, qp := 0, (&poller{t: t, cq: hb.cq}); k < 2; {
		ws := qp.next(deadline)
		if ws == nil {
			t.Fatalf("the peer's send %d did not complete", k)
		}
		for _, w := range ws {
			if w.Status != verbs.WCSuccess || w.WRID != uint64(k) {
				t.Fatalf("peer's send %d: %+v (%v)", k, w, w.Status)
			}
			k++
		}
	}
	for k := 0; k < 2; {
		ws := sp.next(deadline)
		if ws == nil {
			t.Fatalf("receive %d posted during a round did not complete", k)
		}
		for _, w := range ws {
			if w.Status != verbs.WCSuccess || w.WRID != 1<<40+uint64(k) || w.Opcode&verbs.WCRecv == 0 {
				t.Fatalf("receive %d posted during a round: %+v (%v)", k, w, w.Status)
			}
			k++
		}
	}
}

// TestDestroyDuringWaitingRound: Destroy of a QP whose round waits for flushes returns at
// once; the round then stops without touching the destroyed QP, and the engine goes on.
func TestDestroyDuringWaitingRound(t *testing.T) {
	e := newEnv(t, 256)
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	a, _ := e.pairs(t, 1, cp)
	qa, ha := a[0], e.hosts[0]
	held, release := holdDrain(t, qa)
	defer release()
	ha.ctx.eng.do(func() { qa.fallback(ctlMsg{}, false) })
	waitClosed(t, held, "the round's drain")
	err, prompt := within(qa.Destroy, release)
	if !prompt {
		t.Fatalf("Destroy waited for the fallback round (more than %v)", appBound)
	}
	if err != nil {
		t.Fatal(err)
	}
	release()
	ran := make(chan struct{})
	go func() {
		ha.ctx.eng.wait(func() {})
		close(ran)
	}()
	waitClosed(t, ran, "the engine after the stopped round")
}

// TestHeldInlineReusedBuffer: inline SENDs posted while a round waits are held, not posted,
// and the application may reuse an inline WR's buffer as soon as its post returns. The held
// WRs must carry the bytes they were posted with, not what the buffer holds when the round
// posts them (they used to keep only the SGL's address).
func TestHeldInlineReusedBuffer(t *testing.T) {
	e, qa, qb := roundPair(t)
	ha, hb := e.hosts[0], e.hosts[1]
	const n, size, seed = 8, 48, 7
	for i := range n {
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{hb.mr.SGE(bufSize/2+i*slot, slot)}}}); err != nil {
			t.Fatal(err)
		}
	}
	held, release := holdDrain(t, qa)
	defer release()
	ha.ctx.eng.do(func() { qa.fallback(ctlMsg{}, false) })
	waitClosed(t, held, "the round's drain")
	src := ha.buf.Bytes()[:size]
	promptly(t, "the posts during the fallback round", func() error {
		for i := range n {
			payload(src, seed, uint64(i))
			if err := qa.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendInline | verbs.SendSignaled,
				SGL: []verbs.SGE{{Addr: ha.mr.Addr(), Length: size}}}}); err != nil {
				return err
			}
			clear(src) // the application's buffer is its own again
		}
		return nil
	}, release)
	release()
	for i, w := range waitN(t, ha.cq, n) {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) {
			t.Fatalf("send completion %d: %+v", i, w)
		}
	}
	want := make([]byte, size)
	for i, w := range waitN(t, hb.cq, n) {
		payload(want, seed, uint64(i))
		got := hb.buf.Bytes()[bufSize/2+i*slot : bufSize/2+i*slot+size]
		if w.Status != verbs.WCSuccess || w.WRID != uint64(i) || w.ByteLen != size || !bytes.Equal(got, want) {
			t.Fatalf("receive %d: %+v, data as posted %v", i, w, bytes.Equal(got, want))
		}
	}
}

// TestNoReopenWhileHeld: receives the application posted while a round waited are held in the
// receive log until flushHeld posts them, which runs on the engine after the round. A
// recovery that ran on the engine before it reopened the QP's gates (reopenLocked did not look
// at the hold), so the application's next receive went straight to the default RQ, beside
// flushHeld's post of the held ones: a data race on the ring, and receives out of order (the
// race tier of .ci/run, TestRecoveryWaitsForLateCQE: "completion 152 has wr_id 153"). The
// gates now stay closed while anything is held, and flushHeld opens them once it posted it.
func TestNoReopenWhileHeld(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	ha, hb := e.hosts[0], e.hosts[1]
	qb := b[0]
	qb.mu.Lock()
	qb.markSlowLocked()
	_ = qb.mach.event(wordHold, EvHold) // a round waits: the posts are held
	if err := qb.holdRecvsLocked([]verbs.RecvWR{{WRID: 70, SGL: []verbs.SGE{hb.mr.SGE(0, 64)}}}); err != nil {
		qb.mu.Unlock()
		t.Fatal(err)
	}
	reopened := qb.reopenLocked() // a recovery queued before flushHeld
	qb.mu.Unlock()
	if reopened {
		t.Fatal("the gates reopened with a receive held")
	}
	qb.flushHeld()
	if !onFastPath(qb) {
		t.Fatalf("flushHeld posted what was held but left the QP off the fast path (hold %v, held %d)", qb.mach.holdState(), qb.rHeld)
	}
	// The held receive is on the default RQ, first: the next SEND lands in it.
	if err := qb.PostRecv([]verbs.RecvWR{{WRID: 71, SGL: []verbs.SGE{hb.mr.SGE(64, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a[0].PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 32)}}}); err != nil {
		t.Fatal(err)
	}
	if ws := waitN(t, hb.cq, 1); ws[0].WRID != 70 || ws[0].Status != verbs.WCSuccess {
		t.Fatalf("first receive completion %+v, want the held receive (wr_id 70)", ws[0])
	}
}
