package fabric_test

import (
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// pair attaches endpoints 10.0.0.1 and 10.0.0.2 with recording receivers.
func pair(t *testing.T, opts ...fabric.Option) (f *fabric.Fabric, a, b *fabric.Endpoint, sa, sb *sink) {
	t.Helper()
	f = fabric.New(opts...)
	t.Cleanup(func() { f.Close() })
	var err error
	if a, err = f.Attach(ip("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if b, err = f.Attach(ip("10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	sa, sb = &sink{}, &sink{}
	a.SetReceiver(sa.recv)
	b.SetReceiver(sb.recv)
	return f, a, b, sa, sb
}

func TestAttach(t *testing.T) {
	f := fabric.New()
	e, err := f.Attach(ip("::ffff:10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Addr() != ip("10.0.0.1") || f.Endpoint(ip("10.0.0.1")) != e {
		t.Fatalf("endpoint address %v", e.Addr())
	}
	if _, err := f.Attach(ip("10.0.0.1")); !errors.Is(err, fabric.ErrAddrInUse) {
		t.Fatalf("second attach: %v", err)
	}
	if _, err := f.Attach(ip("0.0.0.0")); !errors.Is(err, fabric.ErrBadAddr) {
		t.Fatalf("unspecified: %v", err)
	}
	e.Close()
	if _, err := f.Attach(ip("10.0.0.1")); err != nil {
		t.Fatalf("attach after close: %v", err)
	}
	f.Close()
	if _, err := f.Attach(ip("10.0.0.9")); !errors.Is(err, fabric.ErrClosed) {
		t.Fatalf("attach on closed fabric: %v", err)
	}
}

func TestDeliveryInOrderBothWays(t *testing.T) {
	_, a, b, sa, sb := pair(t)
	const n = 2000
	done := make(chan struct{})
	go func() {
		for i := range uint32(n) {
			b.Send(ack(a.Addr(), i))
		}
		close(done)
	}()
	for i := range uint32(n) {
		a.Send(data(b.Addr(), i))
	}
	<-done
	waitFor(t, "all packets", func() bool { return sa.len() == n && sb.len() == n })
	if !slices.Equal(sb.psns(), seq(0, n)) || !slices.Equal(sa.psns(), seq(0, n)) {
		t.Fatal("packets delivered out of order")
	}
	if p := sb.pkts[0]; p.SrcIP != a.Addr() || p.DstIP != b.Addr() || string(p.Payload) != "\x00\x01\x02" || p.BTH.PadCount != 1 {
		t.Fatalf("delivered %+v", p)
	}
	st := a.Stats()
	if st.TxPackets != n || st.TxBytes != 3*n || st.RxPackets != n || st.TxDropped != 0 || st.RxDropped != 0 {
		t.Fatalf("a stats %+v", st)
	}
}

func TestNoSuchDestinationCountsAsDrop(t *testing.T) {
	_, a, _, _, _ := pair(t)
	a.Send(data(ip("10.9.9.9"), 1))
	if st := a.Stats(); st.TxDropped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestInvalidPacketsAreRefused(t *testing.T) {
	_, a, b, _, sb := pair(t)
	a.Send(&roce.Packet{DstIP: b.Addr(), BTH: roce.BTH{Opcode: roce.WriteOnly}})     // no RETH
	a.Send(&roce.Packet{DstIP: ip("fd00::2"), BTH: roce.BTH{Opcode: roce.SendOnly}}) // mixed families
	a.Send(data(b.Addr(), 1))
	waitFor(t, "the valid packet", func() bool { return sb.len() == 1 })
	if st := a.Stats(); st.TxInvalid != 2 || st.TxDropped != 2 || st.TxPackets != 1 {
		t.Fatalf("stats %+v", st)
	}
	if !errors.Is(a.InvalidError(), roce.ErrAddr) {
		t.Fatalf("last invalid error %v", a.InvalidError())
	}
}

func TestLinkDownUp(t *testing.T) {
	_, a, b, sa, sb := pair(t)
	var events []fabric.LinkEvent
	cancel := b.Watch(func(ev fabric.LinkEvent) { events = append(events, ev) })
	b.SetLinkUp(false)
	b.SetLinkUp(false) // no change, no event
	if b.LinkUp() {
		t.Fatal("link still up")
	}
	a.Send(data(b.Addr(), 1)) // lost at b's receive side
	b.Send(ack(a.Addr(), 2))  // lost at b's transmit side
	b.SetLinkUp(true)
	a.Send(data(b.Addr(), 3))
	b.Send(ack(a.Addr(), 4))
	waitFor(t, "traffic after link up", func() bool { return sa.len() == 1 && sb.len() == 1 })
	if sb.psns()[0] != 3 || sa.psns()[0] != 4 {
		t.Fatalf("received %v and %v", sb.psns(), sa.psns())
	}
	want := []fabric.LinkEvent{{Addr: b.Addr(), Up: false}, {Addr: b.Addr(), Up: true}}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	cancel()
	b.SetLinkUp(false)
	if len(events) != 2 {
		t.Fatal("watcher called after cancel")
	}
	if st := b.Stats(); st.RxDropped != 1 || st.TxDropped != 1 {
		t.Fatalf("b stats %+v", st)
	}
}

func TestLinkDownDropsPacketsInFlight(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	_, a, b, _, sb := pair(t, fabric.WithClock(clk))
	a.Faults(fabric.TX).SetDelay(time.Millisecond, 0)
	a.Send(data(b.Addr(), 1))
	waitFor(t, "delivery timer armed", func() bool { return clk.Pending() == 1 })
	b.SetLinkUp(false)
	clk.Advance(time.Millisecond)
	waitFor(t, "the in-flight packet to be dropped", func() bool { return b.Stats().RxDropped == 1 })
	if sb.len() != 0 {
		t.Fatal("packet delivered to a port whose link went down")
	}
}

func TestDropNext(t *testing.T) {
	for _, dir := range []fabric.Direction{fabric.TX, fabric.RX} {
		t.Run(dir.String(), func(t *testing.T) {
			_, a, b, _, sb := pair(t)
			if dir == fabric.TX {
				a.Faults(fabric.TX).DropNext(3)
			} else {
				b.Faults(fabric.RX).DropNext(3)
			}
			for i := range uint32(10) {
				a.Send(data(b.Addr(), i))
			}
			waitFor(t, "7 packets", func() bool { return sb.len() == 7 })
			if !slices.Equal(sb.psns(), seq(3, 10)) {
				t.Fatalf("received %v", sb.psns())
			}
			if dir == fabric.TX && a.Stats().TxDropped != 3 || dir == fabric.RX && b.Stats().RxDropped != 3 {
				t.Fatalf("stats a %+v b %+v", a.Stats(), b.Stats())
			}
		})
	}
}

func TestDropOnlyAcks(t *testing.T) {
	_, a, b, sa, sb := pair(t)
	b.Faults(fabric.TX).SetDropAcks(true)
	a.Faults(fabric.TX).SetDropAcks(true) // a sends only data: unaffected
	for i := range uint32(20) {
		a.Send(data(b.Addr(), i))
		b.Send(ack(a.Addr(), i))
		rr := &roce.Packet{DstIP: a.Addr(), BTH: roce.BTH{Opcode: roce.ReadResponseOnly, PSN: 100 + i}, Has: roce.HasAETH, Payload: []byte{1}}
		b.Send(rr) // carries an AETH: lost too
		b.Send(&roce.Packet{DstIP: a.Addr(), BTH: roce.BTH{Opcode: roce.ReadResponseMiddle, PSN: 200 + i}, Payload: []byte{1}})
	}
	waitFor(t, "data", func() bool { return sb.len() == 20 && sa.len() == 20 })
	for _, psn := range sa.psns() {
		if psn < 200 {
			t.Fatalf("an AETH-carrying packet (psn %d) arrived", psn)
		}
	}
	b.Faults(fabric.TX).SetDropAcks(false)
	b.Faults(fabric.TX).DropNextAcks(2)
	for i := range uint32(4) {
		b.Send(ack(a.Addr(), 300+i))
		b.Send(data(a.Addr(), 400+i))
	}
	waitFor(t, "the rest", func() bool { return sa.len() == 26 })
	if got := sa.psns()[20:]; !slices.Equal(got, []uint32{400, 401, 302, 402, 303, 403}) {
		t.Fatalf("after DropNextAcks(2): %v", got)
	}
}

func TestFilterAndBlackhole(t *testing.T) {
	_, a, b, _, sb := pair(t)
	b.Faults(fabric.RX).SetFilter(func(p *roce.Packet) bool { return p.BTH.PSN%2 == 1 })
	for i := range uint32(6) {
		a.Send(data(b.Addr(), i))
	}
	waitFor(t, "even PSNs", func() bool { return sb.len() == 3 })
	if !slices.Equal(sb.psns(), []uint32{0, 2, 4}) {
		t.Fatalf("received %v", sb.psns())
	}
	b.Faults(fabric.RX).Reset()
	a.Faults(fabric.TX).SetBlackhole(true)
	a.Send(data(b.Addr(), 10))
	a.Faults(fabric.TX).SetBlackhole(false)
	a.Send(data(b.Addr(), 11))
	waitFor(t, "after blackhole", func() bool { return sb.len() == 4 })
	if sb.psns()[3] != 11 || !a.LinkUp() {
		t.Fatalf("received %v", sb.psns())
	}
}

// lossRun sends n packets through a fabric with random loss and returns the PSNs delivered.
func lossRun(t *testing.T, seed uint64, n uint32) []uint32 {
	t.Helper()
	f, a, b, _, sb := pair(t, fabric.WithSeed(seed))
	a.Faults(fabric.TX).SetLoss(0.2)
	b.Faults(fabric.RX).SetLoss(0.2)
	for i := range n {
		a.Send(data(b.Addr(), i))
	}
	want := int(n) - int(a.Stats().TxDropped) - int(b.Stats().RxDropped)
	waitFor(t, "surviving packets", func() bool { return sb.len() == want })
	f.Close()
	return sb.psns()
}

func TestSeededLossIsDeterministic(t *testing.T) {
	const n = 1000
	r1, r2, r3 := lossRun(t, 42, n), lossRun(t, 42, n), lossRun(t, 43, n)
	if !slices.Equal(r1, r2) {
		t.Fatal("the same seed gave different losses")
	}
	if slices.Equal(r1, r3) {
		t.Fatal("seeds 42 and 43 gave identical losses")
	}
	// Two independent 20% losses keep 64% on average; 1000 packets stay well within 50..80%.
	if len(r1) < n/2 || len(r1) > n*8/10 {
		t.Fatalf("%d of %d delivered with 2x20%% loss", len(r1), n)
	}
	if !slices.IsSorted(r1) {
		t.Fatal("loss reordered packets")
	}
}

func TestReorderNext(t *testing.T) {
	_, a, b, _, sb := pair(t)
	a.Faults(fabric.TX).ReorderNext(2)
	for i := range uint32(5) {
		a.Send(data(b.Addr(), i))
	}
	waitFor(t, "5 packets", func() bool { return sb.len() == 5 })
	if got := sb.psns(); !slices.Equal(got, []uint32{1, 2, 0, 3, 4}) {
		t.Fatalf("arrival order %v", got)
	}
}

func TestReorderHoldExpires(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	_, a, b, _, sb := pair(t, fabric.WithClock(clk))
	b.Faults(fabric.RX).SetMaxHold(5 * time.Millisecond)
	b.Faults(fabric.RX).ReorderNext(3)
	a.Send(data(b.Addr(), 7))
	if clk.Pending() != 1 {
		t.Fatalf("%d timers pending, want the hold timer", clk.Pending())
	}
	clk.Advance(4 * time.Millisecond)
	if sb.len() != 0 || b.Stats().RxPackets != 0 {
		t.Fatal("held packet delivered before its hold expired")
	}
	clk.Advance(time.Millisecond)
	waitFor(t, "held packet", func() bool { return sb.len() == 1 })
}

func TestRandomReorderIsDeterministic(t *testing.T) {
	run := func(seed uint64) []uint32 {
		f, a, b, _, sb := pair(t, fabric.WithSeed(seed))
		a.Faults(fabric.TX).SetReorder(0.1, 3)
		a.Faults(fabric.TX).SetMaxHold(time.Hour)
		for i := range uint32(500) {
			a.Send(data(b.Addr(), i))
		}
		a.Faults(fabric.TX).Reset() // releases a packet still held
		waitFor(t, "all packets", func() bool { return sb.len() == 500 })
		f.Close()
		return sb.psns()
	}
	r1, r2 := run(9), run(9)
	if !slices.Equal(r1, r2) {
		t.Fatal("the same seed reordered differently")
	}
	if slices.IsSorted(r1) {
		t.Fatal("10% reordering left 500 packets in order")
	}
	if !slices.Equal(slices.Sorted(slices.Values(r1)), seq(0, 500)) {
		t.Fatal("reordering lost or duplicated packets")
	}
}

func TestDelay(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	_, a, b, _, sb := pair(t, fabric.WithClock(clk))
	a.Faults(fabric.TX).SetDelay(10*time.Millisecond, 0)
	b.Faults(fabric.RX).SetDelay(5*time.Millisecond, 0)
	a.Send(data(b.Addr(), 1))
	waitFor(t, "delivery timer armed", func() bool { return clk.Pending() == 1 })
	clk.Advance(14 * time.Millisecond)
	if sb.len() != 0 {
		t.Fatal("delivered before 15 ms")
	}
	clk.Advance(time.Millisecond)
	waitFor(t, "delivery at 15 ms", func() bool { return sb.len() == 1 })
}

func TestJitterKeepsOrder(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	_, a, b, _, sb := pair(t, fabric.WithClock(clk), fabric.WithSeed(5))
	a.Faults(fabric.TX).SetDelay(time.Millisecond, 50*time.Millisecond)
	for i := range uint32(200) {
		a.Send(data(b.Addr(), i))
		clk.Advance(100 * time.Microsecond)
	}
	for sb.len() < 200 {
		if _, ok := clk.AdvanceToNext(); !ok {
			waitFor(t, "the delivery goroutine", func() bool { return clk.Pending() > 0 || sb.len() == 200 })
		}
	}
	if !slices.Equal(sb.psns(), seq(0, 200)) {
		t.Fatalf("jitter reordered packets: %v", sb.psns())
	}
}

func TestCloseDropsAndStops(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	f, a, b, _, sb := pair(t, fabric.WithClock(clk))
	a.Faults(fabric.TX).SetDelay(time.Second, 0)
	a.Send(data(b.Addr(), 1))
	b.Close()
	b.Close()
	if f.Endpoint(b.Addr()) != nil {
		t.Fatal("closed endpoint still attached")
	}
	clk.Advance(time.Second)
	a.Send(data(b.Addr(), 2))
	b.Send(data(a.Addr(), 3))
	if sb.len() != 0 || b.Stats().RxDropped != 1 || a.Stats().TxDropped != 1 || b.Stats().TxDropped != 1 {
		t.Fatalf("after close: a %+v b %+v", a.Stats(), b.Stats())
	}
}

// TestJitterIsDeterministic checks that the same seed gives the same delivery times, read on
// a manual clock, and another seed different ones.
func TestJitterIsDeterministic(t *testing.T) {
	run := func(seed uint64) []time.Duration {
		clk := clock.NewManual(time.Unix(0, 0))
		f, a, b, _, _ := pair(t, fabric.WithClock(clk), fabric.WithSeed(seed))
		var times []time.Duration
		b.SetReceiver(func(*roce.Packet) { times = append(times, clk.Now().Sub(time.Unix(0, 0))) })
		a.Faults(fabric.TX).SetDelay(0, time.Second)
		for i := range uint32(50) {
			a.Send(data(b.Addr(), i))
			// Move the clock exactly to the delivery timer, so the receiver reads the
			// packet's delivery time.
			waitFor(t, "the delivery timer", func() bool { return clk.Pending() == 1 })
			clk.AdvanceToNext()
			waitFor(t, "delivery", func() bool { return b.Stats().RxPackets == uint64(i+1) })
		}
		f.Close()
		return times
	}
	r1, r2, r3 := run(3), run(3), run(4)
	if !slices.Equal(r1, r2) {
		t.Fatal("the same seed gave different delays")
	}
	if slices.Equal(r1, r3) {
		t.Fatal("seeds 3 and 4 gave the same delays")
	}
}

// TestSendDeliverZeroAlloc asserts that carrying a packet from Send to the receiver allocates
// nothing when no fault is configured: the in-process fabric is on every emulated data path.
func TestSendDeliverZeroAlloc(t *testing.T) {
	_, a, b, _, _ := pair(t)
	var got atomic.Uint64
	b.SetReceiver(func(*roce.Packet) { got.Add(1) })
	p := data(b.Addr(), 0)
	want := uint64(0)
	send := func() {
		want++
		a.Send(p)
		for got.Load() != want {
			runtime.Gosched()
		}
	}
	for range 100 {
		send() // grow the queue's slice once
	}
	if allocs := testing.AllocsPerRun(500, send); allocs != 0 {
		t.Fatalf("%v allocations per packet", allocs)
	}
}

// TestReceiveQueueOverflow fills the receive queue behind a receiver that does not return:
// arrivals beyond MaxQueued are dropped and counted, as a NIC drops on buffer overflow.
func TestReceiveQueueOverflow(t *testing.T) {
	_, a, b, _, _ := pair(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var delivered atomic.Uint64
	b.SetReceiver(func(*roce.Packet) {
		if delivered.Add(1) == 1 {
			close(entered)
			<-release
		}
	})
	a.Send(data(b.Addr(), 0))
	<-entered // the delivery goroutine now holds packet 0 and the queue is empty
	for i := range uint32(fabric.MaxQueued + 10) {
		a.Send(data(b.Addr(), 1+i))
	}
	if st := b.Stats(); st.RxDropped != 10 {
		t.Fatalf("stats %+v, want 10 RX drops", st)
	}
	close(release)
	waitFor(t, "the queued packets", func() bool { return delivered.Load() == fabric.MaxQueued+1 })
}
