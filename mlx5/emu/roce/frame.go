package roce

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Ethernet framing of RoCEv2, for captures and for checking what a real kernel put on a wire.

// EthernetHeaderLen is the length of an untagged Ethernet II header.
const EthernetHeaderLen = 14

// EtherType values.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
)

// FrameTTL is the TTL (IPv4) or hop limit (IPv6) of frames built by AppendFrame.
const FrameTTL = 64

// MAC is an Ethernet address.
type MAC [6]byte

// MACFor returns a locally administered unicast MAC derived from an IP address (its low four
// bytes after 02:00), so frames built without neighbour resolution still have stable,
// distinct addresses.
func MACFor(ip netip.Addr) MAC {
	b := ip.As16()
	return MAC{0x02, 0x00, b[12], b[13], b[14], b[15]}
}

// FrameLen is the length of p's full Ethernet frame (without FCS).
func (p *Packet) FrameLen() int {
	n := EthernetHeaderLen + UDPHeaderLen + p.WireLen()
	if p.SrcIP.Unmap().Is4() {
		return n + IPv4HeaderLen
	}
	return n + IPv6HeaderLen
}

// AppendFrame appends p as a full Ethernet frame (without FCS) from srcMAC to dstMAC: an IPv4
// (DF, identification 0, TTL FrameTTL) or IPv6 header, a UDP header to port 4791 with a valid
// checksum, and the RoCEv2 payload with its ICRC.
func (p *Packet) AppendFrame(dst []byte, srcMAC, dstMAC MAC) ([]byte, error) {
	fam, err := family(p.SrcIP, p.DstIP)
	if err != nil {
		return dst, fmt.Errorf("roce: frame: %w", err)
	}
	start := len(dst)
	dst = append(dst, dstMAC[:]...)
	dst = append(dst, srcMAC[:]...)
	ipLen := IPv4HeaderLen
	etype := uint16(EtherTypeIPv4)
	if fam == 6 {
		ipLen, etype = IPv6HeaderLen, EtherTypeIPv6
	}
	dst = binary.BigEndian.AppendUint16(dst, etype)
	hdrs := len(dst)
	var zero [IPv6HeaderLen + UDPHeaderLen]byte
	dst = append(dst, zero[:ipLen+UDPHeaderLen]...)
	payloadStart := len(dst)
	dst, err = p.AppendWire(dst)
	if err != nil {
		return dst[:start], fmt.Errorf("roce: frame: %w", err)
	}
	udpLen := len(dst) - payloadStart + UDPHeaderLen
	ip := dst[hdrs : hdrs+ipLen]
	udp := dst[hdrs+ipLen : payloadStart]
	if fam == 4 {
		putIPv4Header(ip, p.SrcIP.Unmap(), p.DstIP.Unmap(), ipLen+udpLen, 0, FrameTTL)
	} else {
		putIPv6Header(ip, p.SrcIP, p.DstIP, udpLen, 0, FrameTTL)
	}
	putUDPHeader(udp, p.SrcPort, UDPPort, udpLen, 0)
	binary.BigEndian.PutUint16(udp[6:], udpChecksum(ip, dst[hdrs+ipLen:]))
	return dst, nil
}

// udpChecksum computes the UDP checksum of segment (header with checksum 0, then data) over
// the pseudo-header of ip (RFC 768, RFC 8200 8.1). A computed 0 is sent as 0xffff.
func udpChecksum(ip, segment []byte) uint16 {
	var s uint32
	if len(ip) == IPv4HeaderLen {
		s += uint32(onesSum(0, ip[12:20]))
	} else {
		s += uint32(onesSum(0, ip[8:40]))
	}
	s += 17 + uint32(len(segment))
	c := ^onesSum(s, segment)
	if c == 0 {
		c = 0xffff
	}
	return c
}

// ParseFrame decodes an Ethernet frame carrying RoCEv2 (IPv4 or IPv6, UDP to port 4791) into
// p and checks the ICRC against the IP and UDP headers as they appear in the frame, so it
// verifies what another sender (the Linux kernel, a NIC) actually emitted. A trailing Ethernet
// FCS or padding beyond the IP length is ignored. p.Payload aliases frame.
func ParseFrame(frame []byte, p *Packet) error {
	*p = Packet{}
	if len(frame) < EthernetHeaderLen {
		return fmt.Errorf("roce: parse frame: %d bytes: %w", len(frame), ErrTruncated)
	}
	b := frame[EthernetHeaderLen:]
	var ip []byte
	var src, dst netip.Addr
	switch et := binary.BigEndian.Uint16(frame[12:]); et {
	case EtherTypeIPv4:
		if len(b) < IPv4HeaderLen || b[0]>>4 != 4 {
			return fmt.Errorf("roce: parse frame: short or bad IPv4 header: %w", ErrFrame)
		}
		ihl := int(b[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(b[2:]))
		if ihl != IPv4HeaderLen || b[9] != 17 || total > len(b) || total < ihl+UDPHeaderLen {
			return fmt.Errorf("roce: parse frame: IPv4 ihl %d proto %d length %d of %d: %w", ihl, b[9], total, len(b), ErrFrame)
		}
		if binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
			return fmt.Errorf("roce: parse frame: IPv4 fragment: %w", ErrFrame)
		}
		ip, b = b[:ihl], b[ihl:total]
		src = netip.AddrFrom4([4]byte(ip[12:16]))
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
	case EtherTypeIPv6:
		if len(b) < IPv6HeaderLen || b[0]>>4 != 6 {
			return fmt.Errorf("roce: parse frame: short or bad IPv6 header: %w", ErrFrame)
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		if b[6] != 17 || IPv6HeaderLen+plen > len(b) || plen < UDPHeaderLen {
			return fmt.Errorf("roce: parse frame: IPv6 next header %d length %d of %d: %w", b[6], plen, len(b), ErrFrame)
		}
		ip, b = b[:IPv6HeaderLen], b[IPv6HeaderLen:IPv6HeaderLen+plen]
		src = netip.AddrFrom16([16]byte(ip[8:24]))
		dst = netip.AddrFrom16([16]byte(ip[24:40]))
	default:
		return fmt.Errorf("roce: parse frame: ethertype %#04x: %w", et, ErrFrame)
	}
	udp := b[:UDPHeaderLen]
	if binary.BigEndian.Uint16(udp[2:]) != UDPPort || int(binary.BigEndian.Uint16(udp[4:])) != len(b) {
		return fmt.Errorf("roce: parse frame: UDP port %d length %d of %d: %w", binary.BigEndian.Uint16(udp[2:]), binary.BigEndian.Uint16(udp[4:]), len(b), ErrFrame)
	}
	wire := b[UDPHeaderLen:]
	if err := decode(wire, p); err != nil {
		return err
	}
	n := len(wire) - ICRCLen
	want := icrcOver(ip, udp, wire[:n])
	if got := binary.LittleEndian.Uint32(wire[n:]); got != want {
		return fmt.Errorf("roce: parse frame %v psn %d: icrc %#08x, computed %#08x: %w", p.BTH.Opcode, p.BTH.PSN, got, want, ErrICRC)
	}
	p.SrcIP, p.DstIP, p.SrcPort = src, dst, binary.BigEndian.Uint16(udp)
	return nil
}
