package roce_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/mlx5/emu/roce/rocetest"
)

// testSeed returns a seed for this run and logs it, so a failure can be replayed.
func testSeed(t testing.TB) uint64 {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return seed
}

func TestRoundTripEveryOpcode(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	seen := map[roce.Opcode]bool{}
	for range 20 {
		for _, p := range rocetest.EveryOpcode(rng) {
			b, err := p.AppendWire(nil)
			if err != nil {
				t.Fatalf("seed %d: marshal %v: %v", seed, p.BTH.Opcode, err)
			}
			if len(b) != p.WireLen() || len(b)%4 != 0 {
				t.Fatalf("seed %d: %v: %d bytes, WireLen %d", seed, p.BTH.Opcode, len(b), p.WireLen())
			}
			var q roce.Packet
			if err := roce.Unmarshal(b, p.SrcIP, p.DstIP, p.SrcPort, &q); err != nil {
				t.Fatalf("seed %d: unmarshal %v: %v", seed, p.BTH.Opcode, err)
			}
			if diff := cmp.Diff(p, &q, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("seed %d: %v round trip (-sent +received):\n%s", seed, p.BTH.Opcode, diff)
			}
			seen[p.BTH.Opcode] = true
		}
	}
	if len(seen) != int(roce.MaxOpcode)+1 {
		t.Fatalf("covered %d opcodes", len(seen))
	}
}

// TestWireLayout pins the byte positions of every header against the IBA layout for one
// fully populated packet of each header combination.
func TestWireLayout(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	p := &roce.Packet{SrcIP: src, DstIP: dst, SrcPort: 1,
		BTH: roce.BTH{Opcode: roce.WriteOnlyWithImmediate, SE: true, MigReq: true, PKey: 0x8001, FECN: true, BECN: true,
			DestQP: 0xabcdef, AckReq: true, PSN: 0x123456},
		Has:     roce.HasRETH | roce.HasImm,
		RETH:    roce.RETH{VA: 0x0102030405060708, RKey: 0x11121314, DMALen: 3},
		Imm:     0xcafef00d,
		Payload: []byte{0xaa, 0xbb, 0xcc},
	}
	b, err := p.AppendWire(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0x0b, 0xd0, 0x80, 0x01, 0xc0, 0xab, 0xcd, 0xef, 0x80, 0x12, 0x34, 0x56, // roce.BTH, pad 1
		1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0, 0, 0, 3, // roce.RETH
		0xca, 0xfe, 0xf0, 0x0d, // ImmDt
		0xaa, 0xbb, 0xcc, 0, // payload, pad
	}
	if !bytes.Equal(b[:len(want)], want) {
		t.Fatalf("wire\n% x\nwant\n% x", b[:len(want)], want)
	}
	a := &roce.Packet{SrcIP: src, DstIP: dst, BTH: roce.BTH{Opcode: roce.AtomicAcknowledge, DestQP: 1, PSN: 2}, Has: roce.HasAETH | roce.HasAtomicAckETH,
		AETH: roce.AETH{Syndrome: roce.AETHNak | roce.NakRemoteAccessError, MSN: 0x010203}, AtomicAck: 0x1112131415161718}
	b, err = a.AppendWire(nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := []byte{0x62, 1, 2, 3, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}; !bytes.Equal(b[roce.BTHLen:roce.BTHLen+12], w) {
		t.Fatalf("roce.AETH+AtomicAckETH % x, want % x", b[roce.BTHLen:roce.BTHLen+12], w)
	}
	c := &roce.Packet{SrcIP: src, DstIP: dst, BTH: roce.BTH{Opcode: roce.CompareSwap}, Has: roce.HasAtomicETH,
		AtomicETH: roce.AtomicETH{VA: 0x0102030405060708, RKey: 0x090a0b0c, SwapOrAdd: 0x1112131415161718, Compare: 0x2122232425262728}}
	b, err = c.AppendWire(nil)
	if err != nil {
		t.Fatal(err)
	}
	w := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28}
	if !bytes.Equal(b[roce.BTHLen:roce.BTHLen+roce.AtomicETHLen], w) {
		t.Fatalf("roce.AtomicETH % x, want % x", b[roce.BTHLen:roce.BTHLen+roce.AtomicETHLen], w)
	}
}

func TestMarshalRejects(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for _, tc := range []struct {
		name string
		p    roce.Packet
		want error
	}{
		{"missing roce.RETH", roce.Packet{SrcIP: src, DstIP: dst, BTH: roce.BTH{Opcode: roce.WriteOnly}}, roce.ErrHeaders},
		{"extra roce.AETH", roce.Packet{SrcIP: src, DstIP: dst, BTH: roce.BTH{Opcode: roce.SendOnly}, Has: roce.HasAETH}, roce.ErrHeaders},
		{"payload on ack", roce.Packet{SrcIP: src, DstIP: dst, BTH: roce.BTH{Opcode: roce.Acknowledge}, Has: roce.HasAETH, Payload: []byte{1}}, roce.ErrHeaders},
		{"bad opcode", roce.Packet{SrcIP: src, DstIP: dst, BTH: roce.BTH{Opcode: 0x15}}, roce.ErrOpcode},
		{"tver", roce.Packet{SrcIP: src, DstIP: dst, BTH: roce.BTH{Opcode: roce.SendOnly, TVer: 1}}, roce.ErrTVer},
		{"no address", roce.Packet{BTH: roce.BTH{Opcode: roce.SendOnly}}, roce.ErrAddr},
		{"mixed families", roce.Packet{SrcIP: src, DstIP: netip.MustParseAddr("fd00::1"), BTH: roce.BTH{Opcode: roce.SendOnly}}, roce.ErrAddr},
	} {
		if _, err := tc.p.AppendWire(nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestUnmarshalRejects(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	p := &roce.Packet{SrcIP: src, DstIP: dst, SrcPort: 4791, BTH: roce.BTH{Opcode: roce.WriteFirst, PSN: 5}, Has: roce.HasRETH, Payload: []byte{1, 2, 3, 4, 5, 6}}
	good, err := p.AppendWire(nil)
	if err != nil {
		t.Fatal(err)
	}
	var q roce.Packet
	for n := range len(good) {
		if err := roce.Unmarshal(good[:n], src, dst, 4791, &q); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	for i := range good {
		if i == 4 {
			continue // resv8a: FECN, BECN and reserved bits, masked out of the ICRC by design
		}
		for bit := range 8 {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			if err := roce.Unmarshal(b, src, dst, 4791, &q); err == nil {
				t.Fatalf("bit %d of byte %d flipped: accepted", bit, i)
			}
		}
	}
	if err := roce.Unmarshal(good, src, dst, 4792, &q); !errors.Is(err, roce.ErrICRC) {
		t.Fatalf("wrong source port: %v, want roce.ErrICRC", err)
	}
	if err := roce.Unmarshal(good, src, netip.MustParseAddr("10.0.0.3"), 4791, &q); !errors.Is(err, roce.ErrICRC) {
		t.Fatalf("wrong destination: %v, want roce.ErrICRC", err)
	}
	if err := roce.Unmarshal(good, src, dst, 4791, &q); err != nil {
		t.Fatal(err)
	}
}

func TestWireZeroAlloc(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	p := &roce.Packet{SrcIP: src, DstIP: dst, SrcPort: 4791, BTH: roce.BTH{Opcode: roce.WriteOnly}, Has: roce.HasRETH, Payload: make([]byte, 1024)}
	buf := make([]byte, 0, 2048)
	var q roce.Packet
	allocs := testing.AllocsPerRun(100, func() {
		b, err := p.AppendWire(buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := roce.Unmarshal(b, src, dst, 4791, &q); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("marshal+unmarshal: %v allocations per packet", allocs)
	}
}

func FuzzUnmarshal(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, p := range rocetest.EveryOpcode(rng) {
		if p.SrcIP.Is4() {
			b, err := p.AppendWire(nil)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, p.SrcPort)
		}
	}
	src, dst := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	f.Fuzz(func(t *testing.T, b []byte, port uint16) {
		var p roce.Packet
		if err := roce.Unmarshal(b, src, dst, port, &p); err != nil {
			return
		}
		// Whatever decodes must re-encode to the same bytes, pad content aside.
		out, err := p.AppendWire(nil)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", p, err)
		}
		if len(out) != len(b) {
			t.Fatalf("re-encoded %d bytes from %d", len(out), len(b))
		}
		if err := roce.Unmarshal(out, src, dst, port, &p); err != nil {
			t.Fatalf("re-encoded packet rejected: %v", err)
		}
	})
}

func FuzzParseFrame(f *testing.F) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, p := range rocetest.EveryOpcode(rng) {
		b, err := p.AppendFrame(nil, roce.MACFor(p.SrcIP), roce.MACFor(p.DstIP))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p roce.Packet
		if err := roce.ParseFrame(frame, &p); err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parsed packet invalid: %v", err)
		}
	})
}
