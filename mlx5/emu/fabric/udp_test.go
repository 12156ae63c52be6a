package fabric_test

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/mlx5/emu/roce/rocetest"
)

// loopbackPair binds two UDP links on random 127/8 addresses, so concurrent runs and other
// packages' tests do not collide on port 4791.
func loopbackPair(t testing.TB, rng *rand.Rand) (a, b *fabric.UDPLink) {
	t.Helper()
	for try := 0; ; try++ {
		x, y := byte(rng.IntN(250)+1), byte(rng.IntN(250)+1)
		la, err := fabric.ListenUDP(netip.AddrFrom4([4]byte{127, 77, x, y}))
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) && try < 10 {
				continue
			}
			t.Fatal(err)
		}
		lb, err := fabric.ListenUDP(netip.AddrFrom4([4]byte{127, 78, x, y}))
		if err != nil {
			la.Close()
			if errors.Is(err, syscall.EADDRINUSE) && try < 10 {
				continue
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { la.Close(); lb.Close() })
		return la, lb
	}
}

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func TestUDPLoopbackEveryOpcode(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	a, b := loopbackPair(t, rng)
	sa, sb := &sink{}, &sink{}
	a.SetReceiver(sa.recv)
	b.SetReceiver(sb.recv)
	var sent []*roce.Packet
	for op := roce.Opcode(0); op <= roce.MaxOpcode; op++ {
		p := rocetest.RandomPacket(rng, op, a.Addr(), b.Addr())
		p.BTH.FECN, p.BTH.BECN = false, false
		want := *p
		want.SrcPort = roce.UDPPort
		sent = append(sent, &want)
		a.Send(p)
	}
	waitFor(t, "every opcode", func() bool { return sb.len() == len(sent) })
	for i, got := range sb.pkts {
		if diff := cmp.Diff(sent[i], got, addrCmp, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("seed %d: packet %d (-sent +received):\n%s", seed, i, diff)
		}
	}
	b.Send(ack(a.Addr(), 9))
	waitFor(t, "the ACK back", func() bool { return sa.len() == 1 })

	// A datagram with a bad ICRC, and one that is not RoCE, are dropped and counted.
	raw, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, net.UDPAddrFromAddrPort(netip.AddrPortFrom(b.Addr(), roce.UDPPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	p := data(b.Addr(), 5)
	p.SrcIP = a.Addr()
	p.SrcPort = uint16(raw.LocalAddr().(*net.UDPAddr).Port)
	w, err := p.AppendWire(nil)
	if err != nil {
		t.Fatal(err)
	}
	w[len(w)-1] ^= 1
	p.SrcIP = netip.MustParseAddr("127.0.0.1")
	good, _ := p.AppendWire(nil)
	for _, d := range [][]byte{w, {1, 2, 3}, good} {
		if _, err := raw.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the valid raw datagram", func() bool { return sb.len() == len(sent)+1 })
	if b.ICRCErrors() != 1 || b.Stats().RxDropped != 2 {
		t.Fatalf("icrc errors %d, stats %+v", b.ICRCErrors(), b.Stats())
	}
	if st := a.Stats(); st.TxPackets != uint64(len(sent)) || st.RxPackets != 1 {
		t.Fatalf("a stats %+v", st)
	}
}

func TestUDPCloseStopsDelivery(t *testing.T) {
	a, b := loopbackPair(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4)))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	b.Send(data(a.Addr(), 1))
	if b.Stats().TxDropped != 1 {
		t.Fatalf("send after close: %+v", b.Stats())
	}
	// The port is free again.
	c, err := fabric.ListenUDP(b.Addr())
	if err != nil {
		t.Fatalf("rebinding a closed link's address: %v", err)
	}
	c.Close()
}

func TestUDPSendErrorsAreCounted(t *testing.T) {
	a, _ := loopbackPair(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5)))
	p := data(a.Addr(), 1)
	p.Payload = make([]byte, 70000) // larger than any UDP datagram
	a.Send(p)
	if a.Stats().TxDropped != 1 || a.SendError() == nil {
		t.Fatalf("oversized send: stats %+v, error %v", a.Stats(), a.SendError())
	}
	if !errors.Is(a.SendError(), syscall.EMSGSIZE) {
		t.Fatalf("send error %v, want EMSGSIZE", a.SendError())
	}
	if a.Stats().TxPackets != 0 || a.Stats().TxInvalid != 0 {
		t.Fatalf("oversized packet counted as sent or invalid: %+v", a.Stats())
	}
	a.Send(&roce.Packet{DstIP: a.Addr(), BTH: roce.BTH{Opcode: roce.WriteOnly}}) // no RETH
	if st := a.Stats(); st.TxInvalid != 1 || st.TxDropped != 2 || !errors.Is(a.SendError(), roce.ErrHeaders) {
		t.Fatalf("invalid packet: stats %+v, error %v", st, a.SendError())
	}
}
