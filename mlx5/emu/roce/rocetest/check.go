package rocetest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// CheckFrame compares what tshark decoded from one frame with the packet that was sent and
// its RoCEv2 UDP payload (wire, ending with the ICRC). It returns "" when every header field
// tshark shows matches, no checksum tshark verified is bad and nothing is malformed, or a
// description of the first difference.
func CheckFrame(f Frame, p *roce.Packet, wire []byte) string {
	if m := f.Malformed(); m != "" {
		return m
	}
	if !strings.Contains(f["frame.protocols"], "udp:infiniband") {
		return "not decoded as InfiniBand over UDP: " + f["frame.protocols"]
	}
	// Wireshark's checksum status: 0 bad, 1 good, 2 not verified.
	if f.First("ip.checksum.status") == "0" || f.First("udp.checksum.status") == "0" {
		return "bad checksum: ip " + f.First("ip.checksum.status") + " udp " + f.First("udp.checksum.status")
	}
	pad := uint64(-len(p.Payload) & 3)
	type want struct {
		field string
		v     uint64
	}
	ws := []want{
		{"udp.dstport", roce.UDPPort},
		{"infiniband.bth.opcode", uint64(p.BTH.Opcode)},
		{"infiniband.bth.padcnt", pad},
		{"infiniband.bth.tver", 0},
		{"infiniband.bth.p_key", uint64(p.BTH.PKey)},
		{"infiniband.bth.destqp", uint64(p.BTH.DestQP)},
		{"infiniband.bth.psn", uint64(p.BTH.PSN)},
		{"infiniband.invariant.crc", uint64(binary.BigEndian.Uint32(wire[len(wire)-roce.ICRCLen:]))},
	}
	if p.Has&roce.HasRETH != 0 {
		ws = append(ws, want{"infiniband.reth.va", p.RETH.VA}, want{"infiniband.reth.r_key", uint64(p.RETH.RKey)},
			want{"infiniband.reth.dmalen", uint64(p.RETH.DMALen)})
	}
	if p.Has&roce.HasAtomicETH != 0 {
		ws = append(ws, want{"infiniband.atomiceth.swapdt", p.AtomicETH.SwapOrAdd}, want{"infiniband.atomiceth.cmpdt", p.AtomicETH.Compare})
	}
	if p.Has&roce.HasAETH != 0 {
		ws = append(ws, want{"infiniband.aeth.syndrome", uint64(p.AETH.Syndrome)}, want{"infiniband.aeth.msn", uint64(p.AETH.MSN)})
	}
	if p.Has&roce.HasAtomicAckETH != 0 {
		ws = append(ws, want{"infiniband.atomicacketh.origremdt", p.AtomicAck})
	}
	for _, w := range ws {
		got, err := f.Uint(w.field)
		if err != nil {
			return err.Error()
		}
		if got != w.v {
			return fmt.Sprintf("%s = %#x, sent %#x", w.field, got, w.v)
		}
	}
	for _, b := range []struct {
		field string
		v     bool
	}{{"infiniband.bth.se", p.BTH.SE}, {"infiniband.bth.m", p.BTH.MigReq}, {"infiniband.bth.a", p.BTH.AckReq}} {
		if f.Bool(b.field) != b.v {
			return fmt.Sprintf("%s = %q, sent %v", b.field, f.First(b.field), b.v)
		}
	}
	if p.Has&roce.HasImm != 0 {
		var imm [4]byte
		binary.BigEndian.PutUint32(imm[:], p.Imm)
		if got := f.First("infiniband.immdt"); got != hex.EncodeToString(imm[:]) {
			return fmt.Sprintf("ImmDt %q, sent %x", got, imm)
		}
	} else if f.First("infiniband.immdt") != "" {
		return "ImmDt decoded on an opcode without one"
	}
	// tshark shows the pad as part of the data.
	data := hex.EncodeToString(append(append([]byte(nil), p.Payload...), make([]byte, pad)...))
	if got := strings.ReplaceAll(f.First("data.data"), ":", ""); got != data {
		return fmt.Sprintf("data %q, sent payload and pad %q", got, data)
	}
	return ""
}
