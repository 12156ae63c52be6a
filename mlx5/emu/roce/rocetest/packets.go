package rocetest

import (
	"math/rand/v2"
	"net/netip"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// RandomPacket returns a valid packet of opcode op from src to dst, with header fields drawn
// from rng and, for opcodes with data, a payload of 0 or 3 to 12 bytes (so every pad count
// occurs). Payload byte 2 is never zero: Wireshark's InfiniBand dissector takes a payload
// whose bytes 2-3 are zero for an encapsulated Ethernet type and then reports the random
// bytes as a malformed packet of that type.
func RandomPacket(rng *rand.Rand, op roce.Opcode, src, dst netip.Addr) *roce.Packet {
	p := &roce.Packet{
		SrcIP:   src,
		DstIP:   dst,
		SrcPort: uint16(49152 + rng.IntN(16384)),
		BTH: roce.BTH{
			Opcode: op,
			SE:     rng.IntN(2) == 0,
			MigReq: rng.IntN(2) == 0,
			PKey:   uint16(rng.Uint32()) | 0x8000,
			FECN:   rng.IntN(4) == 0,
			BECN:   rng.IntN(4) == 0,
			DestQP: rng.Uint32() & 0xffffff,
			AckReq: rng.IntN(2) == 0,
			PSN:    rng.Uint32() & 0xffffff,
		},
		Has: op.Headers(),
	}
	if p.Has&roce.HasRETH != 0 {
		p.RETH = roce.RETH{VA: rng.Uint64(), RKey: rng.Uint32(), DMALen: rng.Uint32N(1 << 20)}
	}
	if p.Has&roce.HasAETH != 0 {
		syn := []uint8{roce.AETHAck | 0x1f, roce.AETHRNRNak | 3, roce.AETHNak | roce.NakRemoteAccessError, roce.AETHNak | roce.NakPSNSequenceError}
		p.AETH = roce.AETH{Syndrome: syn[rng.IntN(len(syn))], MSN: rng.Uint32() & 0xffffff}
	}
	if p.Has&roce.HasImm != 0 {
		p.Imm = rng.Uint32()
	}
	if p.Has&roce.HasAtomicETH != 0 {
		p.AtomicETH = roce.AtomicETH{VA: rng.Uint64() &^ 7, RKey: rng.Uint32(), SwapOrAdd: rng.Uint64(), Compare: rng.Uint64()}
	}
	if p.Has&roce.HasAtomicAckETH != 0 {
		p.AtomicAck = rng.Uint64()
	}
	if op.HasPayload() {
		n := 0
		if rng.IntN(6) != 0 {
			n = 3 + rng.IntN(10)
		}
		p.Payload = make([]byte, n)
		for i := range p.Payload {
			p.Payload[i] = byte(rng.Uint32())
		}
		if n > 0 {
			p.Payload[2] |= 0x01
		}
		p.BTH.PadCount = uint8(-len(p.Payload) & 3)
	}
	return p
}

// EveryOpcode returns RandomPacket for every RC opcode, each once over IPv4 and once over
// IPv6 (documentation prefixes).
func EveryOpcode(rng *rand.Rand) []*roce.Packet {
	v4 := [2]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}
	v6 := [2]netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")}
	var out []*roce.Packet
	for op := roce.Opcode(0); op <= roce.MaxOpcode; op++ {
		for _, a := range [][2]netip.Addr{v4, v6} {
			out = append(out, RandomPacket(rng, op, a[0], a[1]))
		}
	}
	return out
}
