package fabric_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// BenchmarkUDPPingPong measures one round trip of a small packet between two UDP links on
// loopback: each iteration sends a packet from a to b, whose receiver answers it, and waits
// for the answer on a. It is the link's share of an emulated RoCE latency.
func BenchmarkUDPPingPong(b *testing.B) {
	x, y := loopbackPair(b, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)))
	back := make(chan struct{}, 1)
	y.SetReceiver(func(p *roce.Packet) { x2 := ack(x.Addr(), p.BTH.PSN); y.Send(x2) })
	x.SetReceiver(func(*roce.Packet) { back <- struct{}{} })
	p := data(y.Addr(), 0)
	b.ResetTimer()
	for i := range b.N {
		p.BTH.PSN = uint32(i)
		x.Send(p)
		select {
		case <-back:
		case <-time.After(10 * time.Second): // only a guard: the packet was lost
			b.Fatalf("round trip %d lost: stats %+v / %+v", i, x.Stats(), y.Stats())
		}
	}
}

// BenchmarkUDPStream measures the link's one-way throughput of MTU-sized packets: a sends,
// b's receiver counts, and the iteration's bytes are those of one packet payload.
func BenchmarkUDPStream(b *testing.B) {
	x, y := loopbackPair(b, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8)))
	got := make(chan struct{}, 1)
	var n int
	y.SetReceiver(func(*roce.Packet) {
		n++
		if n == b.N {
			got <- struct{}{}
		}
	})
	p := data(y.Addr(), 0)
	p.BTH.Opcode = roce.SendMiddle
	p.Payload = make([]byte, burstMTU)
	b.SetBytes(burstMTU)
	b.ResetTimer()
	for i := range b.N {
		p.BTH.PSN = uint32(i)
		x.Send(p)
	}
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		if y.SocketDrops() == 0 {
			b.Fatalf("received %d of %d with no drop counted", n, b.N)
		}
		b.Logf("receiver could not keep up: %d dropped and counted", y.SocketDrops())
	}
}
