package rc

import (
	"encoding/binary"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// FuzzHandlePacket feeds arbitrary packets, PSNs near the expected ones, to both QPs of a
// connection with WRs outstanding. The engine must not panic, must not complete more WRs than
// were posted, and every completion it gives must be in posting order.
func FuzzHandlePacket(f *testing.F) {
	f.Add([]byte{0x0a, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0x11, 0, 0x60, 1})
	f.Add([]byte{0x11, 1, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0c, 0, 0, 0, 8})
	f.Add([]byte{0x13, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x12, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		e := newEnv(t, nil)
		e.hb.register(1, 0, 1<<14, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
		e.hb.postRecv(make([]byte, 3000))
		e.pair.A.SetDown(true) // requests stay outstanding; only fuzzed packets arrive
		posted := 0
		for _, op := range []Op{OpWrite, OpRead, OpFetchAdd, OpSend, OpCompareSwap} {
			wr := WorkRequest{Index: uint16(posted), Op: op, RKey: 1, Local: [][]byte{make([]byte, 2500)}}
			if op.isAtomic() {
				wr.Local = [][]byte{make([]byte, 8)}
			}
			e.post(e.a, wr)
			posted++
		}
		for len(data) >= 16 {
			chunk := data[:16]
			data = data[16:]
			p := &roce.Packet{SrcIP: ipA, DstIP: ipB}
			p.BTH.Opcode = roce.Opcode(chunk[0] % 0x16)
			p.BTH.AckReq = chunk[1]&1 != 0
			p.BTH.SE = chunk[1]&2 != 0
			delta := uint32(int8(chunk[2])) // PSNs around the expected ones, wrapping
			p.Has = p.BTH.Opcode.Headers()
			p.AETH.Syndrome = chunk[3]
			p.RETH = roce.RETH{VA: uint64(binary.LittleEndian.Uint16(chunk[4:])), RKey: uint32(chunk[6] % 3), DMALen: uint32(binary.LittleEndian.Uint16(chunk[7:]))}
			p.AtomicETH = roce.AtomicETH{VA: uint64(binary.LittleEndian.Uint16(chunk[4:])), RKey: uint32(chunk[6] % 3), SwapOrAdd: uint64(chunk[9])}
			p.AtomicAck = uint64(chunk[10])
			p.Payload = make([]byte, int(binary.LittleEndian.Uint16(chunk[11:]))%1200)
			if chunk[13]&1 == 0 {
				p.BTH.PSN = psnAdd(100, delta) // toward A, the requester
				p.BTH.DestQP = 0x11
				e.a.HandlePacket(p)
			} else {
				p.BTH.PSN = psnAdd(5000, delta) // toward B, the responder
				p.BTH.DestQP = 0x22
				e.b.HandlePacket(p)
			}
		}
		s := e.ha.sendC()
		if len(s) > posted {
			t.Fatalf("%d completions for %d WRs", len(s), posted)
		}
		for i, c := range s {
			if c.Index != uint16(i) {
				t.Fatalf("completion %d for WR %d: out of order", i, c.Index)
			}
		}
	})
}
