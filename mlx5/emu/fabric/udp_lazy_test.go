package fabric_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
)

// TestLazyUDPBindsOnUse: two lazy links on one address coexist until one is used; the first
// Send binds its socket and delivers; the other then cannot bind (EADDRINUSE, reported by
// Activate), and closing the first frees the address for it.
func TestLazyUDPBindsOnUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(t.Name()[0]), 7))
	dst, src := loopbackPair(t, rng) // a bound receiver and an address to derive ours from
	s := &sink{}
	dst.SetReceiver(s.recv)
	a4 := src.Addr().As4()
	addr := netip.AddrFrom4([4]byte{127, 79, a4[2], a4[3]})

	z1, err := fabric.NewLazyUDP(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { z1.Close() })
	z2, err := fabric.NewLazyUDP(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { z2.Close() })
	if z1.Active() || z2.Active() || !z1.LinkUp() {
		t.Fatalf("before use: active %v/%v, link up %v; want both unbound, the loopback up", z1.Active(), z2.Active(), z1.LinkUp())
	}
	z1.Send(data(dst.Addr(), 5))
	waitFor(t, "the first packet", func() bool { return s.len() == 1 })
	if !z1.Active() || z1.Stats().TxPackets != 1 {
		t.Fatalf("after Send: active %v, stats %+v", z1.Active(), z1.Stats())
	}
	if err := z2.Activate(); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second link on a bound address: %v, want EADDRINUSE", err)
	}
	if err := z2.Activate(); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a failed bind is kept: %v", err)
	}
	if err := z1.Close(); err != nil {
		t.Fatal(err)
	}
	z3, err := fabric.NewLazyUDP(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { z3.Close() })
	if err := z3.Activate(); err != nil {
		t.Fatalf("after the owner closed: %v", err)
	}
}
