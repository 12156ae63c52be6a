package roce

import "errors"

// Errors returned by the wire codec. They are wrapped with the operation and the detail, so
// test with errors.Is.
var (
	// ErrTruncated: the buffer ends before the headers, pad and ICRC the opcode requires.
	ErrTruncated = errors.New("roce: packet truncated")
	// ErrOpcode: the BTH opcode is not an RC opcode this emulator implements.
	ErrOpcode = errors.New("roce: unsupported opcode")
	// ErrHeaders: Packet.Has or the payload does not match what the opcode carries.
	ErrHeaders = errors.New("roce: headers do not match opcode")
	// ErrTVer: the BTH transport version is not 0 (IBA 9.2: such packets are dropped).
	ErrTVer = errors.New("roce: unsupported BTH transport version")
	// ErrICRC: the invariant CRC does not match the packet.
	ErrICRC = errors.New("roce: bad ICRC")
	// ErrAddr: the source and destination addresses are invalid or of different families.
	ErrAddr = errors.New("roce: bad IP addresses")
	// ErrFrame: an Ethernet frame is not IPv4/IPv6 + UDP to port 4791, or is inconsistent.
	ErrFrame = errors.New("roce: not a RoCEv2 frame")
)
