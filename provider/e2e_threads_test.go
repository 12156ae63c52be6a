package provider_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestE2EPostWhilePolling posts on two goroutines (receives on one side, SENDs on the other)
// while a third polls both CQs, on queues small enough to wrap many times, as SHIFT's engine
// posts on a default QP while the application polls its CQ. A poller that read a retired
// WQE's wr_id after freeing its slot would hand back the wr_id of the WR posted into it
// since; every completion must carry the next wr_id in order. Under -race the detector sees
// the receive slot's two accesses unordered (it did, every run, before the fix). The send
// queue's retire had the same order and was fixed alike, but the detector does not see it
// here: each SEND rings the emulated NIC's doorbell, which orders the poster behind it.
func TestE2EPostWhilePolling(t *testing.T) {
	tb := newTestbed(t)
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	o.cap.MaxSendWR, o.cap.MaxRecvWR = 4, 4
	a, b := connectedPair(t, tb, o)
	const total, size = 2000, 64
	deadline := time.Now().Add(60 * time.Second)
	var stop atomic.Bool
	var wg sync.WaitGroup
	// A failed check stops the posters before the cleanup destroys their QPs.
	defer func() { stop.Store(true); wg.Wait() }()
	var recvPosted atomic.Int64
	errc := make(chan error, 2)
	// poster posts WR n = 0..total-1 with post, retrying while the queue is full (the poller
	// frees it) and, for SENDs, until receive n is posted so no SEND meets an empty RQ.
	poster := func(full error, ready func(n int) bool, post func(n int) error, posted func()) {
		defer wg.Done()
		for n := 0; n < total && !stop.Load(); {
			if !ready(n) {
				runtime.Gosched()
				continue
			}
			err := post(n)
			switch {
			case err == nil:
				n++
				posted()
			case errors.Is(err, full):
				runtime.Gosched()
			default:
				errc <- err
				return
			}
		}
		errc <- nil
	}
	wg.Add(2)
	go poster(verbs.ErrRQFull, func(int) bool { return true }, func(n int) error {
		return b.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(n), SGL: []verbs.SGE{b.mr.SGE(0, size)}}})
	}, func() { recvPosted.Add(1) })
	go poster(verbs.ErrSQFull, func(n int) bool { return recvPosted.Load() > int64(n) }, func(n int) error {
		return a.qp.PostSend([]verbs.SendWR{{WRID: uint64(n), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(4096, size)}}})
	}, func() {})
	var wc [4]verbs.WC
	recvd, acked := 0, 0
	for recvd < total || acked < total {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d received, %d acknowledged of %d", recvd, acked, total)
		}
		n, err := b.cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:n] {
			if w.Status != verbs.WCSuccess || w.Opcode != verbs.WCRecv || w.WRID != uint64(recvd) {
				t.Fatalf("receive %d: %+v", recvd, w)
			}
			recvd++
		}
		m, err := a.cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:m] {
			if w.Status != verbs.WCSuccess || w.WRID != uint64(acked) {
				t.Fatalf("send %d: %+v", acked, w)
			}
			acked++
		}
		if n+m == 0 {
			runtime.Gosched()
		}
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatalf("post: %v", err)
		}
	}
}
