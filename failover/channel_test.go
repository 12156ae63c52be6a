package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Completion events keep working across a fallback: a receiver that sleeps on its channel
// is woken for every SEND, before and after the default NIC fails.
func TestCompletionEventsAcrossFallback(t *testing.T) {
	e := newEnv(t, 256)
	hb := e.hosts[1]
	ch, err := as[*CompChannel](hb.ctx.CreateCompChannel())
	if err != nil {
		t.Fatal(err)
	}
	cq, err := as[*CQ](hb.ctx.CreateCQ(verbs.CQInitAttr{CQE: 256, Channel: ch}))
	if err != nil {
		t.Fatal(err)
	}
	ha := e.hosts[0]
	qa, err := as[*QP](ha.pd.CreateQP(verbs.QPInitAttr{SendCQ: ha.cq, RecvCQ: ha.cq, Cap: smallCap}))
	if err != nil {
		t.Fatal(err)
	}
	qb, err := as[*QP](hb.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: smallCap}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		qa.Destroy()
		qb.Destroy()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hb.ctx.WaitShadow(ctx)
		cq.Destroy()
		hb.ctx.WaitShadow(ctx)
		ch.Close()
	})
	ea := verbs.Endpoint{QPN: qa.QPN(), PSN: 1, GID: ha.gid}
	eb := verbs.Endpoint{QPN: qb.QPN(), PSN: 2, GID: hb.gid}
	if err := verbs.Connect(qa, e.attr, ea, eb); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(qb, e.attr, eb, ea); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, h := range e.hosts {
		if err := h.ctx.WaitShadow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const n = 8
	for i := range n {
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{hb.mr.SGE(i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	var wcs [8]verbs.WC
	// The receiver: arm, poll (a completion may have come before the arming), sleep.
	recvd := make(chan error, 1)
	go func() {
		for got < n {
			if err := cq.Arm(false); err != nil {
				recvd <- err
				return
			}
			k, err := cq.Poll(wcs[:])
			if err != nil {
				recvd <- err
				return
			}
			for _, w := range wcs[:k] {
				if w.Status != verbs.WCSuccess || w.WRID != uint64(got) {
					recvd <- &wcError{w}
					return
				}
				got++
			}
			if k == 0 {
				if _, err := ch.GetEvent(ctx); err != nil {
					recvd <- err
					return
				}
			}
		}
		recvd <- nil
	}()
	for i := range n {
		if i == n/2 {
			e.linkDown(0)
		}
		if err := qa.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 32)}}}); err != nil {
			t.Fatal(err)
		}
		waitN(t, ha.cq, 1)
	}
	if err := <-recvd; err != nil {
		t.Fatalf("receiver after %d: %v", got, err)
	}
	if qb.RecvState() != RecvFallback {
		t.Fatalf("receiver state %v", qb.RecvState())
	}
}

type wcError struct{ w verbs.WC }

func (e *wcError) Error() string { return "unexpected completion " + e.w.Status.String() }

// GetEvent waits in the network poller (a second open file of the channel's pipe), a
// cancelled wait ends with ErrTimeout, and the descriptor Fd hands to C stays blocking, as
// libibverbs' ibv_get_cq_event reads it without polling first.
func TestCompChannelGetEventWait(t *testing.T) {
	e := newEnv(t, 16)
	ch, err := as[*CompChannel](e.hosts[0].ctx.CreateCompChannel())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if ch.wait == nil {
		t.Skip("the channel's pipe could not be reopened through /proc/self/fd (not mounted?): GetEvent polls")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ch.GetEvent(ctx)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, verbs.ErrTimeout) || !errors.Is(err, context.Canceled) {
			t.Fatalf("GetEvent after cancel: %v, want ErrTimeout and context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("GetEvent did not end 10 s after its context was cancelled")
	}
	if fl, err := unix.FcntlInt(uintptr(ch.Fd()), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("the channel's descriptor: flags %#x, %v; want blocking", fl, err)
	}
	// A cancelled wait leaves nothing behind for the next one: an event raised later is read
	// (the raise writes the record the CQs' events write).
	cq, err := as[*CQ](e.hosts[0].ctx.CreateCQ(verbs.CQInitAttr{CQE: 16, Channel: ch}))
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = ch.GetEvent(short)
	cancel()
	if !errors.Is(err, verbs.ErrTimeout) {
		t.Fatalf("GetEvent with nothing raised: %v, want ErrTimeout", err)
	}
	long, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cq.ev.armed.Store(true)
	cq.raise()
	if got, err := ch.GetEvent(long); err != nil || got != cq {
		t.Fatalf("GetEvent after cancelled waits: %v, %v; want the CQ's event", got, err)
	}
	// Two readers: the short ones' cancelled waits do not end the long one's, whichever
	// waits through the poller's file.
	got := make(chan error, 1)
	go func() {
		_, err := ch.GetEvent(long)
		got <- err
	}()
	for range 3 {
		short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := ch.GetEvent(short)
		cancel()
		if !errors.Is(err, verbs.ErrTimeout) {
			t.Fatalf("a short wait beside a long one: %v, want ErrTimeout", err)
		}
	}
	cq.ev.armed.Store(true)
	cq.raise()
	if err := <-got; err != nil {
		t.Fatalf("the long wait beside cancelled short ones: %v", err)
	}
}
