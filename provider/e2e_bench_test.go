package provider_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// BenchmarkEmulatedWrite64 posts a signaled 64-byte inline RDMA WRITE on a QP of the emulated
// ConnectX and polls its completion: provider and emulated NIC together, per operation. The
// allocations reported are the emulated NIC's (testing counts the whole process).
func BenchmarkEmulatedWrite64(b *testing.B) {
	tb := newTestbed(b)
	a, r := connectedPair(b, tb, defaultPairOpts())
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: r.mr.Addr(), RKey: r.mr.RKey()}}
	var wc [1]verbs.WC
	b.ReportAllocs()
	for b.Loop() {
		if err := a.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := a.cq.Poll(wc[:])
			if err != nil || (n == 1 && wc[0].Status != verbs.WCSuccess) {
				b.Fatal(err, wc[0].Status)
			}
			if n == 1 {
				break
			}
			// The emulated NIC runs as goroutines of this process: yield to it.
			runtime.Gosched()
		}
	}
}

// BenchmarkEmulatedWriteEvent is BenchmarkEmulatedWrite64 with the CQ armed and its event
// read from the channel: "pending" polls the completion first, so the event is there when
// GetEvent reads (a read; before, each call also registered a duplicate of the descriptor
// with the network poller and removed it), "wait" reads the event first and waits for it
// (the registration is kept between waits). getevent-ns is GetEvent's time alone.
func BenchmarkEmulatedWriteEvent(b *testing.B) {
	for _, pending := range []bool{true, false} {
		name := "wait"
		if pending {
			name = "pending"
		}
		b.Run(name, func(b *testing.B) { emulatedWriteEvent(b, pending) })
	}
}

func emulatedWriteEvent(b *testing.B, pending bool) {
	tb := newTestbed(b)
	a, r := connectedPair(b, tb, defaultPairOpts())
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: r.mr.Addr(), RKey: r.mr.RKey()}}
	var wc [1]verbs.WC
	var inGet time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	poll := func() {
		for {
			n, err := a.cq.Poll(wc[:])
			if err != nil || (n == 1 && wc[0].Status != verbs.WCSuccess) {
				b.Fatal(err, wc[0].Status)
			}
			if n == 1 {
				return
			}
			runtime.Gosched()
		}
	}
	for b.Loop() {
		if err := a.cq.Arm(false); err != nil {
			b.Fatal(err)
		}
		if err := a.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		if pending {
			poll()
		}
		t0 := time.Now()
		cq, err := a.ch.GetEvent(ctx)
		inGet += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		cq.AckEvents(1)
		if !pending {
			poll()
		}
	}
	b.ReportMetric(float64(inGet.Nanoseconds())/float64(b.N), "getevent-ns")
}
