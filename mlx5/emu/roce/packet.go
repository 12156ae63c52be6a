// Package roce defines the RC packets the emulated ConnectX exchanges: the InfiniBand transport
// headers (BTH, RETH, AETH, ImmDt, AtomicETH, AtomicAckETH) as carried by RoCEv2 (UDP port
// 4791), their wire encoding with the ICRC, and the Link a port transmits on. The in-process
// fabric moves *Packet values; the UDP fabric moves their wire bytes.
package roce

import "net/netip"

// Opcode is the BTH opcode (IBA vol. 1, 9.2.1). Only the RC transport (prefix 000) is used.
type Opcode uint8

// RC opcodes.
const (
	SendFirst              Opcode = 0x00
	SendMiddle             Opcode = 0x01
	SendLast               Opcode = 0x02
	SendLastWithImmediate  Opcode = 0x03
	SendOnly               Opcode = 0x04
	SendOnlyWithImmediate  Opcode = 0x05
	WriteFirst             Opcode = 0x06
	WriteMiddle            Opcode = 0x07
	WriteLast              Opcode = 0x08
	WriteLastWithImmediate Opcode = 0x09
	WriteOnly              Opcode = 0x0a
	WriteOnlyWithImmediate Opcode = 0x0b
	ReadRequest            Opcode = 0x0c
	ReadResponseFirst      Opcode = 0x0d
	ReadResponseMiddle     Opcode = 0x0e
	ReadResponseLast       Opcode = 0x0f
	ReadResponseOnly       Opcode = 0x10
	Acknowledge            Opcode = 0x11
	AtomicAcknowledge      Opcode = 0x12
	CompareSwap            Opcode = 0x13
	FetchAdd               Opcode = 0x14
)

// Header presence bits in Packet.Has.
const (
	HasRETH uint8 = 1 << iota
	HasAETH
	HasImm
	HasAtomicETH
	HasAtomicAckETH
)

// BTH is the Base Transport Header (12 bytes on the wire).
type BTH struct {
	Opcode   Opcode
	SE       bool   // solicited event
	MigReq   bool   // M bit
	PadCount uint8  // 0..3 bytes of pad before the ICRC
	TVer     uint8  // transport header version, 0
	PKey     uint16 // partition key, 0xffff by default
	FECN     bool
	BECN     bool
	DestQP   uint32 // 24 bits
	AckReq   bool   // A bit
	PSN      uint32 // 24 bits
}

// RETH is the RDMA Extended Transport Header (16 bytes).
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// AETH syndrome classes (bits 7:5 of the syndrome byte).
const (
	AETHAck    uint8 = 0x00 // low 5 bits: credit count
	AETHRNRNak uint8 = 0x20 // low 5 bits: RNR timer code
	AETHNak    uint8 = 0x60 // low 5 bits: NAK code below
)

// NAK codes carried in the low 5 bits of an AETHNak syndrome.
const (
	NakPSNSequenceError  uint8 = 0
	NakInvalidRequest    uint8 = 1
	NakRemoteAccessError uint8 = 2
	NakRemoteOperational uint8 = 3
	NakInvalidRDRequest  uint8 = 4
)

// AETH is the ACK Extended Transport Header (4 bytes).
type AETH struct {
	Syndrome uint8
	MSN      uint32 // 24 bits
}

// AtomicETH is the Atomic Extended Transport Header (28 bytes).
type AtomicETH struct {
	VA        uint64
	RKey      uint32
	SwapOrAdd uint64
	Compare   uint64
}

// Packet is one RC packet between two RoCEv2 endpoints. Has says which optional headers are
// present; the opcode determines which must be (see Headers). Ownership of a Packet and its
// Payload passes to the receiver on Link.Send.
type Packet struct {
	SrcIP, DstIP netip.Addr // the endpoints' RoCEv2 GIDs, as IPv4 or IPv6 addresses
	SrcPort      uint16     // UDP source port (flow entropy); destination is always 4791
	BTH          BTH
	Has          uint8
	RETH         RETH
	AETH         AETH
	Imm          uint32 // ImmDt, host order of the 32-bit big-endian wire value
	AtomicETH    AtomicETH
	AtomicAck    uint64 // AtomicAckETH: the original remote value
	Payload      []byte
}

// Headers returns the optional headers an RC packet of this opcode carries (IBA table 38).
func (o Opcode) Headers() uint8 {
	switch o {
	case SendLastWithImmediate, SendOnlyWithImmediate:
		return HasImm
	case WriteFirst, WriteOnly:
		return HasRETH
	case WriteLastWithImmediate:
		return HasImm
	case WriteOnlyWithImmediate:
		return HasRETH | HasImm
	case ReadRequest:
		return HasRETH
	case ReadResponseFirst, ReadResponseLast, ReadResponseOnly:
		return HasAETH
	case Acknowledge:
		return HasAETH
	case AtomicAcknowledge:
		return HasAETH | HasAtomicAckETH
	case CompareSwap, FetchAdd:
		return HasAtomicETH
	}
	return 0
}

// Link is what an emulated port transmits on. Implementations: the in-process fabric (with
// fault hooks) and RoCEv2 over UDP.
type Link interface {
	// Send transmits p toward p.DstIP and takes ownership of p. It does not block on the
	// network: a link that is down, or a packet the fabric decides to lose, is dropped
	// silently, as a NIC's transmit path does.
	Send(p *Packet)
	// SetReceiver installs the function called for every packet that arrives on this link.
	// It is called from the link's own goroutine, one packet at a time, in arrival order.
	SetReceiver(func(*Packet))
	// Addr is this endpoint's address (the IP of its RoCEv2 GID).
	Addr() netip.Addr
	// Close detaches the link; later Sends are dropped and the receiver is no longer called.
	Close() error
}
