package roce

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// cnpConnectX4Lx is a RoCEv2 congestion notification packet captured from a ConnectX-4 Lx, as
// published in scapy's RoCE regression tests (test/contrib/roce.uts). Its last four bytes are
// the ICRC the NIC computed, so it is a hardware known answer for the ICRC: it exercises the
// masking of TOS (0xc2), TTL, IP checksum, UDP checksum and the BECN bit in resv8a, with a
// non-zero IP identification that must be covered.
const cnpConnectX4Lx = `
e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2
003c 718c 4000 4011 9161 0a00 1101 0a00
1201 0000 12b7 0028 0000 8100 ffff 4000
0118 0000 0000 0000 0000 0000 0000 0000
0000 0000 0000 82fd 002a`

func hexBytes(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestICRCKnownAnswerConnectX4Lx(t *testing.T) {
	frame := hexBytes(t, cnpConnectX4Lx)
	ip := frame[EthernetHeaderLen : EthernetHeaderLen+IPv4HeaderLen]
	udp := frame[EthernetHeaderLen+IPv4HeaderLen : EthernetHeaderLen+IPv4HeaderLen+UDPHeaderLen]
	transport := frame[EthernetHeaderLen+IPv4HeaderLen+UDPHeaderLen : len(frame)-ICRCLen]
	want := frame[len(frame)-ICRCLen:]
	var got [4]byte
	binary.LittleEndian.PutUint32(got[:], icrcOver(ip, udp, transport))
	if string(got[:]) != string(want) {
		t.Fatalf("ICRC of the ConnectX-4 Lx CNP: computed % x, the NIC sent % x", got, want)
	}
	// Variant fields must not matter: change each and the ICRC stays.
	for _, mut := range []struct {
		name string
		b    []byte
		i    int
	}{{"tos", ip, 1}, {"ttl", ip, 8}, {"ip checksum", ip, 10}, {"udp checksum", udp, 6}, {"resv8a", transport, 4}} {
		saved := mut.b[mut.i]
		mut.b[mut.i] ^= 0x5a
		if c := icrcOver(ip, udp, transport); c != binary.LittleEndian.Uint32(want) {
			t.Errorf("changing variant field %s changed the ICRC", mut.name)
		}
		mut.b[mut.i] = saved
	}
	// Invariant fields must: the IP identification, the source port, the PSN.
	for _, mut := range []struct {
		name string
		b    []byte
		i    int
	}{{"ip id", ip, 5}, {"udp source port", udp, 1}, {"psn", transport, 11}, {"pad", transport, 20}} {
		saved := mut.b[mut.i]
		mut.b[mut.i] ^= 0x01
		if c := icrcOver(ip, udp, transport); c == binary.LittleEndian.Uint32(want) {
			t.Errorf("changing invariant field %s left the ICRC unchanged", mut.name)
		}
		mut.b[mut.i] = saved
	}
}

// TestICRCMatchesFrameHeaders checks that ICRC, which rebuilds the IP and UDP headers a Linux
// sender emits, agrees with the computation over the headers AppendFrame actually writes, for
// both families, and that ParseFrame accepts the frame and rejects a corrupted one.
// TestLRHSeed checks the precomputed CRC state after the masked LRH against the seed the
// Linux kernel's rdma_rxe starts from (drivers/infiniband/sw/rxe/rxe_icrc.c: 0xdebb20e3, the
// uninverted CRC-32 state after eight 0xff bytes).
func TestLRHSeed(t *testing.T) {
	if got := ^lrhCRC; got != 0xdebb20e3 {
		t.Fatalf("CRC state after the masked LRH %#08x, rdma_rxe uses 0xdebb20e3", got)
	}
}

func TestICRCMatchesFrameHeaders(t *testing.T) {
	for _, src := range []string{"10.0.0.1", "fd00::1", "::ffff:10.0.0.1"} {
		s := netip.MustParseAddr(src)
		d := netip.MustParseAddr(strings.Replace(src, "1", "2", 1))
		p := &Packet{SrcIP: s, DstIP: d, SrcPort: 50000, BTH: BTH{Opcode: SendOnly, PKey: 0xffff, DestQP: 0x11, PSN: 7}, Payload: []byte("hello")}
		frame, err := p.AppendFrame(nil, MACFor(s), MACFor(d))
		if err != nil {
			t.Fatal(err)
		}
		var q Packet
		if err := ParseFrame(frame, &q); err != nil {
			t.Fatalf("%s: ParseFrame: %v", src, err)
		}
		if string(q.Payload) != "hello" || q.BTH.PSN != 7 || q.SrcPort != 50000 || q.SrcIP != s.Unmap() {
			t.Fatalf("%s: parsed %+v", src, q)
		}
		frame[len(frame)-ICRCLen-1] ^= 0x80 // pad byte
		if err := ParseFrame(frame, &q); !errors.Is(err, ErrICRC) {
			t.Fatalf("%s: corrupted frame: %v, want ErrICRC", src, err)
		}
	}
}
