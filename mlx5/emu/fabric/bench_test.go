package fabric_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// BenchmarkFabricOneWay measures packets sent by one endpoint and delivered to another's
// receiver through the in-process fabric (no faults configured).
func BenchmarkFabricOneWay(b *testing.B) {
	f := fabric.New()
	defer f.Close()
	a, _ := f.Attach(ip("10.0.0.1"))
	c, _ := f.Attach(ip("10.0.0.2"))
	var got atomic.Int64
	c.SetReceiver(func(*roce.Packet) { got.Add(1) })
	pkts := make([]roce.Packet, 1024)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		p := &pkts[n%len(pkts)]
		*p = roce.Packet{DstIP: c.Addr(), BTH: roce.BTH{Opcode: roce.SendOnly, PSN: uint32(n)}}
		a.Send(p)
		n++
		if n%len(pkts) == 0 {
			for got.Load() != int64(n) {
				time.Sleep(time.Microsecond)
			}
		}
	}
	for got.Load() != int64(n) {
		time.Sleep(time.Microsecond)
	}
}

// BenchmarkUDPLinkOneWay measures packets marshalled, sent over loopback UDP, received,
// ICRC-checked and delivered, with at most 64 packets of 1 KiB in flight.
func BenchmarkUDPLinkOneWay(b *testing.B) {
	la, lb := loopbackPair(b, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9)))
	var got atomic.Int64
	lb.SetReceiver(func(*roce.Packet) { got.Add(1) })
	payload := make([]byte, 1024)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		deadline := time.Now().Add(10 * time.Second)
		for n-got.Load() >= 64 {
			if time.Now().After(deadline) {
				b.Fatalf("%d packets sent, %d received: loopback lost packets (tx %+v rx %+v)", n, got.Load(), la.Stats(), lb.Stats())
			}
			time.Sleep(time.Microsecond)
		}
		la.Send(&roce.Packet{DstIP: lb.Addr(), BTH: roce.BTH{Opcode: roce.SendOnly, PSN: uint32(n)}, Payload: payload})
		n++
	}
}
