package failover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shift-rdma/shift/probe"
	"github.com/shift-rdma/shift/provider/verbs"
)

// wantAsyncEvents reads host h's async events through Context.GetAsyncEvent until every type
// in want was seen: SHIFT reads the device's events itself, and the application must still
// get each of them.
func wantAsyncEvents(t *testing.T, c *Context, want ...verbs.AsyncEventType) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left := map[verbs.AsyncEventType]bool{}
	for _, w := range want {
		left[w] = true
	}
	for len(left) > 0 {
		ev, err := c.GetAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("get async event (still waiting for %v): %v", left, err)
		}
		if ev.Type == verbs.EventPortErr && ev.Port != 1 {
			t.Errorf("PORT_ERR names port %d", ev.Port)
		}
		delete(left, ev.Type)
	}
}

// TestDeadNICStream: the default NIC of one host dies (DEVICE_FATAL) in the middle of a
// stream. The stream continues on the backup exactly once and in order (runStream checks
// both), the dead side's fallback was started by the event, and its application still reads
// DEVICE_FATAL and PORT_ERR from the context.
func TestDeadNICStream(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	for _, side := range []int{0, 1} {
		t.Run(fmt.Sprintf("dead-host%d", side), func(t *testing.T) {
			e := newEnv(t, 256)
			e.down = func(h int) { e.cl.Hosts[h].Devices[0].NIC().Kill() }
			a, b := e.pairs(t, 1, cp)
			runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 200, size: 4096, failAt: 100, failHost: side, seed: uint64(40 + side)})
			if st := a[0].SendState(); st != SendFallback {
				t.Fatalf("sender state %v, want Fallback (err %v)", st, a[0].Err())
			}
			st := e.hosts[side].ctx.Stats()
			if st.EventFallbacks == 0 || st.AsyncEvents < 2 {
				t.Fatalf("dead side's stats %+v: no fallback by the async events", st)
			}
			wantAsyncEvents(t, e.hosts[side].ctx, verbs.EventDeviceFatal, verbs.EventPortErr)
			t.Logf("stats A %+v B %+v", e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats())
		})
	}
}

// TestHungNICWatchdog: the sender's default NIC hangs silently in the middle of a stream (no
// CQE, no event, link up). Only the completion watchdog can notice; with a bound of 500 ms the
// stream continues on the backup exactly once, in order.
func TestHungNICWatchdog(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	const bound = 500 * time.Millisecond
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.CQWatchdog = bound })
	e.down = func(h int) { e.cl.Hosts[h].Devices[0].NIC().Hang() }
	a, b := e.pairs(t, 1, cp)
	start := time.Now()
	runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 200, size: 4096, failAt: 100, failHost: 0, seed: 50})
	st := e.hosts[0].ctx.Stats()
	if st.WatchdogFallbacks == 0 || a[0].SendState() != SendFallback {
		t.Fatalf("no watchdog fallback: state %v, stats %+v", a[0].SendState(), st)
	}
	if st.AsyncEvents != 0 {
		t.Errorf("a hung NIC raised %d async events", st.AsyncEvents)
	}
	t.Logf("stream with a hang: %v (bound %v); latency %v; stats %+v", time.Since(start), bound, a[0].FallbackLatency(), st)
}

// TestWatchdogIdleAndProgress drives the watchdog's scan with its own clock (the goroutine's
// bound is an hour, so it never runs): an idle QP is never suspect however long it stays
// idle, even on a NIC that hung; a QP whose completion waits unpolled is progressing however
// long the application takes to poll; a QP with a signaled WRITE on the hung NIC falls back
// once the bound passed, and the WRITE completes from the backup.
func TestWatchdogIdleAndProgress(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	const bound = time.Hour
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.CQWatchdog = bound })
	a, b := e.pairs(t, 1, cp)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	c := ha.ctx
	runStream(t, e, qa, b[0], stream{mode: modeWrite, msgs: 20, size: 512, failAt: -1, seed: 51})
	t0 := time.Now()
	scan := func(what string, at time.Time, want bool) {
		t.Helper()
		if got := c.watchdogScan(at); got != want {
			t.Fatalf("%s: watchdog fired %v, want %v (stats %+v)", what, got, want, c.Stats())
		}
	}
	scan("idle", t0, false)
	scan("idle, two bounds later", t0.Add(2*bound), false)

	write := func(id uint64) {
		t.Helper()
		w := verbs.SendWR{WRID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ha.mr.SGE(0, 256)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}
		if err := qa.PostSend([]verbs.SendWR{w}); err != nil {
			t.Fatal(err)
		}
	}
	// Slow to poll: the completion is there, unpolled, for longer than the bound.
	write(1)
	deadline := time.Now().Add(20 * time.Second)
	for !qa.scq.def.CompletionWaiting() {
		if time.Now().After(deadline) {
			t.Fatal("the WRITE's completion never came")
		}
		time.Sleep(100 * time.Microsecond)
	}
	scan("completion waiting", t0.Add(3*bound), false)
	scan("completion waiting, a bound later", t0.Add(5*bound), false)
	p := &poller{t: t, cq: ha.cq}
	if ws := p.next(deadline); len(ws) != 1 || ws[0].WRID != 1 || ws[0].Status != verbs.WCSuccess {
		t.Fatalf("completion %+v", ws)
	}

	// The NIC hangs. Idle, the QP is still not suspect.
	e.cl.Hosts[0].Devices[0].NIC().Hang()
	scan("idle on a hung NIC", t0.Add(6*bound), false)
	scan("idle on a hung NIC, a bound later", t0.Add(8*bound), false)
	write(2)
	scan("WRITE outstanding", t0.Add(9*bound), false)
	scan("WRITE outstanding, less than the bound", t0.Add(9*bound+bound/2), false)
	scan("WRITE outstanding for the bound", t0.Add(10*bound), true)
	if ws := p.next(time.Now().Add(20 * time.Second)); len(ws) != 1 || ws[0].WRID != 2 || ws[0].Status != verbs.WCSuccess {
		t.Fatalf("completion after the watchdog's fallback %+v; %s", ws, e.describe(qa, b[0]))
	}
	if st := c.Stats(); st.WatchdogFallbacks != 1 || qa.SendState() != SendFallback {
		t.Fatalf("state %v, stats %+v", qa.SendState(), st)
	}
}

// TestPortErrFallsBack: with link events on but a link watcher that never reports (a silent
// channel), the device's own PORT_ERR starts the fallback of a sender that never polls.
func TestPortErrFallsBack(t *testing.T) {
	silent := make(chan probe.LinkEvent)
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.LinkEvents = silent })
	linkDownWithoutPolling(t, e)
	if st := e.hosts[0].ctx.Stats(); st.EventFallbacks == 0 || st.LinkEvents != 0 {
		t.Fatalf("stats %+v: want the fallback started by PORT_ERR", st)
	}
	wantAsyncEvents(t, e.hosts[0].ctx, verbs.EventPortErr)
}

// TestAccessErrEventRecorded: a WRITE with a bad rkey makes the responder's device raise
// QP_ACCESS_ERR. SHIFT records the refusal on the responder's QP (its first flush is then the
// application's, whatever it has outstanding), and the application still reads the event,
// naming its default QP.
func TestAccessErrEventRecorded(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	postBadRKeyWrite(t, qa, ha, hb)
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCRemAccessErr {
		t.Fatalf("requester completion %+v, want REM_ACCESS_ERR", w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev, err := hb.ctx.GetAsyncEvent(ctx)
	if err != nil || ev.Type != verbs.EventQPAccessErr || ev.QP != verbs.QP(qb.def) {
		t.Fatalf("responder's event %+v (%v), want QP_ACCESS_ERR of its default QP", ev, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !qb.respRefused.Load() {
		if time.Now().After(deadline) {
			t.Fatal("SHIFT did not record the refusal")
		}
		time.Sleep(100 * time.Microsecond)
	}
	qb.mu.Lock()
	cause := qb.flushCause()
	qb.mu.Unlock()
	if cause != classApp {
		t.Fatalf("first flush after QP_ACCESS_ERR classified %v", cause)
	}
}

// TestDestroyedQPEventsWithdrawn: an event SHIFT forwarded for a QP that the application
// destroys before reading it is withdrawn, as the kernel withdraws a destroyed QP's events
// (libibverbs would hand out a freed struct ibv_qp); the other events stay, in order.
func TestDestroyedQPEventsWithdrawn(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	postBadRKeyWrite(t, qa, ha, hb)
	deadline := time.Now().Add(20 * time.Second)
	for !qb.respRefused.Load() { // forwarded, then acted on: it waits in the application's descriptor
		if time.Now().After(deadline) {
			t.Fatal("no QP_ACCESS_ERR")
		}
		time.Sleep(100 * time.Microsecond)
	}
	e.linkDown(1) // PORT_ERR behind it (link events are off: no fallback)
	for hb.ctx.Stats().AsyncEvents < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no PORT_ERR")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := qb.Destroy(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev, err := hb.ctx.GetAsyncEvent(ctx)
	if err != nil || ev.Type != verbs.EventPortErr || ev.Port != 1 {
		t.Fatalf("first event after the destroy %+v (%v), want PORT_ERR: the QP's event was not withdrawn", ev, err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if ev, err := hb.ctx.GetAsyncEvent(short); err == nil {
		t.Fatalf("event %+v left after the destroy", ev)
	}
}

// postBadRKeyWrite posts a signaled WRITE from qa with a wrong rkey for hb's MR: the
// responder's device refuses it (REM_ACCESS_ERR at the requester, QP_ACCESS_ERR at hb).
func postBadRKeyWrite(t *testing.T, qa *QP, ha, hb *testHost) {
	t.Helper()
	if err := qa.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)},
		RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey() ^ 0x5a00}}); err != nil {
		t.Fatal(err)
	}
}

// TestWatchdogStoppedQP: a QP the application moved to ERR passes the default QP's
// completions through (appstop.go). On a live NIC its flushes come at once and it is never
// suspect, however long after; on a NIC that hung, no flush comes: the watchdog (its scan
// driven here) takes the device for dead once the bound passed, and SHIFT completes the
// QP's SEND with WR_FLUSH_ERR itself (deadflush.go). Before, the application waited for ever.
func TestWatchdogStoppedQP(t *testing.T) {
	const bound = time.Hour
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.CQWatchdog = bound; o.ProbeInterval = time.Hour })
	a, _ := e.pairs(t, 2, smallCap)
	ha := e.hosts[0]
	c := ha.ctx
	t0 := time.Now()
	scan := func(what string, at time.Time, want bool) {
		t.Helper()
		if got := c.watchdogScan(at); got != want {
			t.Fatalf("%s: watchdog fired %v, want %v (stats %+v)", what, got, want, c.Stats())
		}
	}
	// The peer posts no receive: the SEND waits on RNR (rnr_retry 7) until the flush.
	stop := func(q *QP, id uint64) {
		t.Helper()
		if err := q.PostSend([]verbs.SendWR{{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if err := q.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	stop(a[0], 1)
	if w := waitN(t, ha.cq, 1)[0]; w.WRID != 1 || w.Status != verbs.WCWRFlushErr {
		t.Fatalf("completion %+v", w)
	}
	scan("stopped on a live NIC", t0, false)
	scan("stopped on a live NIC, two bounds later", t0.Add(2*bound), false)

	e.cl.Hosts[0].Devices[0].NIC().Hang()
	stop(a[1], 2)
	scan("stopped on a hung NIC", t0.Add(3*bound), false)
	scan("stopped on a hung NIC, less than the bound", t0.Add(3*bound+bound/2), false)
	scan("stopped on a hung NIC for the bound", t0.Add(4*bound), true)
	if w := waitN(t, ha.cq, 1)[0]; w.WRID != 2 || w.Status != verbs.WCWRFlushErr || w.QPNum != a[1].QPN() {
		t.Fatalf("completion after the watchdog %+v", w)
	}
	expectNoMore(t, ha.cq)
}

// TestStopDefaultInReset: a reset round whose INIT failed (the default NIC died in the
// middle of it, before SHIFT read its DEVICE_FATAL) leaves the default QP in RESET, and the
// next fallback's stop of the default QP must not fail on it: RESET→ERR is no transition the
// kernel allows (EINVAL), and the QP failed with its WRs flushed to the application
// (simulation seed 265 with deep receive queues, before the sixth stop of 2026-11-29). A QP
// in RESET executes nothing: there is nothing to stop.
func TestStopDefaultInReset(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	e := newEnv(t, 64)
	a, _ := e.pairs(t, 1, cp)
	q := a[0]
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.def.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := q.stopDefaultLocked(); err != nil {
		t.Fatalf("stopping a default QP in RESET: %v", err)
	}
	if s := q.def.State(); s != verbs.QPStateReset {
		t.Fatalf("default QP in %v after the stop, want RESET", s)
	}
}
