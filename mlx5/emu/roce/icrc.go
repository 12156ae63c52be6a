package roce

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// The ICRC (IBA vol. 1, 7.8.1; RoCEv2 annex A17.3.3) is a CRC-32 (the Ethernet polynomial,
// bit-reflected, as crc32.IEEE) over the packet's invariant fields, transmitted least
// significant byte first like the Ethernet FCS. For RoCEv2 the fields are, in order:
//   - 8 bytes of 1s standing for the masked LRH that InfiniBand link layers carry;
//   - the IP header with its variant fields set to 1s (IPv4: TOS, TTL, header checksum;
//     IPv6: traffic class, flow label, hop limit);
//   - the UDP header with its checksum set to 1s;
//   - the BTH with its resv8a byte (FECN, BECN and reserved bits) set to 1s;
//   - the rest of the transport headers, the payload and the pad.
//
// The IP identification and flags are invariant and covered. A RoCEv2 sender does not
// fragment: it sets DF, and Linux then sends identification 0 from an unconnected socket (as
// rdma_rxe does), so the header built here for the UDP fabric carries DF and identification 0.

// lrhCRC is the CRC of the 8 bytes of 1s that start every RoCEv2 ICRC computation, standing
// for the masked LRH of InfiniBand link layers (rdma_rxe starts from the same state, 0xdebb20e3
// before inversion).
var lrhCRC = crcBytes(0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// Header lengths of the encapsulation.
const (
	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8
)

// family returns 4 or 6 for a valid address pair of one family; IPv4-mapped IPv6 addresses
// count as IPv4, as RoCEv2 GIDs carry IPv4 addresses that way.
func family(src, dst netip.Addr) (int, error) {
	if !src.IsValid() || !dst.IsValid() {
		return 0, fmt.Errorf("src %v dst %v: %w", src, dst, ErrAddr)
	}
	s4, d4 := src.Unmap().Is4(), dst.Unmap().Is4()
	if s4 != d4 {
		return 0, fmt.Errorf("src %v dst %v: mixed families: %w", src, dst, ErrAddr)
	}
	if s4 {
		return 4, nil
	}
	return 6, nil
}

// ICRC computes the invariant CRC of a RoCEv2 UDP payload sent from src:srcPort to
// dst:4791, where transport is the UDP payload without its trailing ICRC (BTH through pad). It
// assumes the IP header a Linux sender emits for RoCEv2 (IPv4: DF set, identification 0, no
// options; IPv6: no extension headers). It returns 0 for an invalid address pair.
func ICRC(src, dst netip.Addr, srcPort uint16, transport []byte) uint32 {
	var hdr [IPv6HeaderLen + UDPHeaderLen]byte
	udpLen := UDPHeaderLen + len(transport) + ICRCLen
	fam, err := family(src, dst)
	if err != nil {
		return 0
	}
	var ip []byte
	if fam == 4 {
		ip = hdr[:IPv4HeaderLen]
		putIPv4Header(ip, src.Unmap(), dst.Unmap(), IPv4HeaderLen+udpLen, 0, 0)
	} else {
		ip = hdr[:IPv6HeaderLen]
		putIPv6Header(ip, src, dst, udpLen, 0, 0)
	}
	udp := hdr[len(ip) : len(ip)+UDPHeaderLen]
	putUDPHeader(udp, srcPort, UDPPort, udpLen, 0)
	return icrcOver(ip, udp, transport)
}

// icrcOver computes the ICRC from the IP and UDP headers as sent (they are copied, then
// masked) and the transport bytes (BTH through pad).
func icrcOver(ip, udp, transport []byte) uint32 {
	var hdr [IPv6HeaderLen + UDPHeaderLen + BTHLen]byte
	n := copy(hdr[:], ip)
	if n == IPv4HeaderLen {
		hdr[1] = 0xff                 // TOS (DSCP, ECN)
		hdr[8] = 0xff                 // TTL
		hdr[10], hdr[11] = 0xff, 0xff // header checksum
	} else {
		hdr[0] |= 0x0f                            // traffic class, high nibble
		hdr[1], hdr[2], hdr[3] = 0xff, 0xff, 0xff // traffic class low nibble, flow label
		hdr[7] = 0xff                             // hop limit
	}
	n += copy(hdr[n:], udp[:UDPHeaderLen])
	hdr[n-2], hdr[n-1] = 0xff, 0xff // UDP checksum
	bth := n
	n += copy(hdr[n:], transport[:BTHLen])
	hdr[bth+4] = 0xff // resv8a: FECN, BECN, reserved
	crc := crcBytes(lrhCRC, hdr[:n])
	return crc32.Update(crc, crc32.IEEETable, transport[BTHLen:])
}

// crcBytes is crc32.Update for the few header bytes, table-driven one byte at a time. The
// masked headers live on the stack, and crc32.Update dispatches through a function value that
// would move them to the heap on every packet.
func crcBytes(crc uint32, b []byte) uint32 {
	crc = ^crc
	for _, v := range b {
		crc = crc32.IEEETable[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// putIPv4Header writes a 20-byte IPv4 header for a RoCEv2 datagram: DF, identification 0,
// protocol UDP, and a valid header checksum.
func putIPv4Header(b []byte, src, dst netip.Addr, totalLen int, tos, ttl uint8) {
	b[0] = 0x45
	b[1] = tos
	binary.BigEndian.PutUint16(b[2:], uint16(totalLen))
	binary.BigEndian.PutUint16(b[4:], 0)      // identification
	binary.BigEndian.PutUint16(b[6:], 0x4000) // DF, fragment offset 0
	b[8] = ttl
	b[9] = 17 // UDP
	b[10], b[11] = 0, 0
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[10:], ^onesSum(0, b[:IPv4HeaderLen]))
}

// putIPv6Header writes a 40-byte IPv6 header with next header UDP.
func putIPv6Header(b []byte, src, dst netip.Addr, payloadLen int, tclass, hopLimit uint8) {
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(tclass)<<20)
	binary.BigEndian.PutUint16(b[4:], uint16(payloadLen))
	b[6] = 17
	b[7] = hopLimit
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
}

// putUDPHeader writes a UDP header.
func putUDPHeader(b []byte, srcPort, dstPort uint16, length int, csum uint16) {
	binary.BigEndian.PutUint16(b[0:], srcPort)
	binary.BigEndian.PutUint16(b[2:], dstPort)
	binary.BigEndian.PutUint16(b[4:], uint16(length))
	binary.BigEndian.PutUint16(b[6:], csum)
}

// onesSum adds b to the 16-bit one's complement sum s (RFC 1071), folded.
func onesSum(s uint32, b []byte) uint16 {
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
