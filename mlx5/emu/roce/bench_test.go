package roce_test

import (
	"net/netip"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

func benchPacket(n int) *roce.Packet {
	return &roce.Packet{SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 4791,
		BTH: roce.BTH{Opcode: roce.WriteOnly, PKey: 0xffff, DestQP: 7, PSN: 9}, Has: roce.HasRETH,
		RETH: roce.RETH{VA: 0x1000, RKey: 5, DMALen: uint32(n)}, Payload: make([]byte, n)}
}

func BenchmarkMarshal(b *testing.B) {
	for _, n := range []int{0, 1024, 4096} {
		b.Run(sizeName(n), func(b *testing.B) {
			p := benchPacket(n)
			buf := make([]byte, 0, 8192)
			b.SetBytes(int64(p.WireLen()))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.AppendWire(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, n := range []int{0, 1024, 4096} {
		b.Run(sizeName(n), func(b *testing.B) {
			p := benchPacket(n)
			w, err := p.AppendWire(nil)
			if err != nil {
				b.Fatal(err)
			}
			var q roce.Packet
			b.SetBytes(int64(len(w)))
			b.ReportAllocs()
			for b.Loop() {
				if err := roce.Unmarshal(w, p.SrcIP, p.DstIP, p.SrcPort, &q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func sizeName(n int) string {
	switch n {
	case 0:
		return "0B"
	case 1024:
		return "1KiB"
	}
	return "4KiB"
}
