package fabric_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// sink records the packets a receiver gets.
type sink struct {
	mu   sync.Mutex
	pkts []*roce.Packet
}

func (s *sink) recv(p *roce.Packet) {
	s.mu.Lock()
	s.pkts = append(s.pkts, p)
	s.mu.Unlock()
}

func (s *sink) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pkts)
}

// psns returns the PSNs received, in arrival order.
func (s *sink) psns() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint32, len(s.pkts))
	for i, p := range s.pkts {
		out[i] = p.BTH.PSN
	}
	return out
}

// waitFor polls cond until it holds; the timeout only guards against a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// data returns a SEND_ONLY packet with PSN psn to dst.
func data(dst netip.Addr, psn uint32) *roce.Packet {
	return &roce.Packet{DstIP: dst, SrcPort: 49152, BTH: roce.BTH{Opcode: roce.SendOnly, PKey: 0xffff, DestQP: 0x12, PSN: psn}, Payload: []byte{byte(psn), 1, 2}}
}

// ack returns an ACKNOWLEDGE packet with PSN psn to dst.
func ack(dst netip.Addr, psn uint32) *roce.Packet {
	return &roce.Packet{DstIP: dst, SrcPort: 49152, BTH: roce.BTH{Opcode: roce.Acknowledge, PKey: 0xffff, DestQP: 0x34, PSN: psn}, Has: roce.HasAETH, AETH: roce.AETH{Syndrome: roce.AETHAck | 0x1f, MSN: psn}}
}

func seq(from, to uint32) []uint32 {
	var out []uint32
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
