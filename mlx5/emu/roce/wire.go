package roce

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Wire sizes of the RoCEv2 UDP payload pieces (IBA vol. 1, 9.2-9.5; annex A17).
const (
	UDPPort         = 4791 // IANA port of RoCEv2
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	ImmLen          = 4
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ICRCLen         = 4
)

// MaxOpcode is the highest RC opcode the codec accepts.
const MaxOpcode = FetchAdd

// Valid reports whether o is an RC opcode this emulator implements.
func (o Opcode) Valid() bool { return o <= MaxOpcode }

// HasPayload reports whether packets of this opcode carry a data payload (IBA table 38):
// requests and responses that move data do; ACKs, read requests and atomics do not.
func (o Opcode) HasPayload() bool {
	switch o {
	case ReadRequest, Acknowledge, AtomicAcknowledge, CompareSwap, FetchAdd:
		return false
	}
	return o.Valid()
}

// String names the opcode as the IBA does.
func (o Opcode) String() string {
	if int(o) < len(opcodeNames) {
		return opcodeNames[o]
	}
	return fmt.Sprintf("Opcode(%#02x)", uint8(o))
}

var opcodeNames = [...]string{
	"SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_WITH_IMMEDIATE", "SEND_ONLY",
	"SEND_ONLY_WITH_IMMEDIATE", "RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST",
	"RDMA_WRITE_LAST_WITH_IMMEDIATE", "RDMA_WRITE_ONLY", "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	"RDMA_READ_REQUEST", "RDMA_READ_RESPONSE_FIRST", "RDMA_READ_RESPONSE_MIDDLE",
	"RDMA_READ_RESPONSE_LAST", "RDMA_READ_RESPONSE_ONLY", "ACKNOWLEDGE", "ATOMIC_ACKNOWLEDGE",
	"COMPARE_SWAP", "FETCH_ADD",
}

// headerLen is the length of BTH plus the extension headers in has.
func headerLen(has uint8) int {
	n := BTHLen
	if has&HasRETH != 0 {
		n += RETHLen
	}
	if has&HasAtomicETH != 0 {
		n += AtomicETHLen
	}
	if has&HasAETH != 0 {
		n += AETHLen
	}
	if has&HasAtomicAckETH != 0 {
		n += AtomicAckETHLen
	}
	if has&HasImm != 0 {
		n += ImmLen
	}
	return n
}

// padLen is the number of pad bytes that bring a payload to a multiple of 4 (IBA 9.2.1.6).
func padLen(payload int) int { return -payload & 3 }

// IsAck reports whether p is a response carrying an AETH (ACK, NAK, atomic ACK or a read
// response first/last/only): the packets a lost-ACK fault removes.
func (p *Packet) IsAck() bool { return p.Has&HasAETH != 0 }

// Validate checks that p's optional headers and payload are those its opcode carries, and that
// its addresses form a valid RoCEv2 pair.
func (p *Packet) Validate() error {
	op := p.BTH.Opcode
	if !op.Valid() {
		return fmt.Errorf("roce: validate %v: %w", op, ErrOpcode)
	}
	if p.Has != op.Headers() {
		return fmt.Errorf("roce: validate %v: headers %#x, opcode carries %#x: %w", op, p.Has, op.Headers(), ErrHeaders)
	}
	if len(p.Payload) != 0 && !op.HasPayload() {
		return fmt.Errorf("roce: validate %v: %d payload bytes on an opcode without payload: %w", op, len(p.Payload), ErrHeaders)
	}
	if p.BTH.TVer != 0 {
		return fmt.Errorf("roce: validate: tver %d: %w", p.BTH.TVer, ErrTVer)
	}
	if _, err := family(p.SrcIP, p.DstIP); err != nil {
		return fmt.Errorf("roce: validate: %w", err)
	}
	return nil
}

// WireLen is the length of p's RoCEv2 UDP payload: headers, payload, pad and ICRC.
func (p *Packet) WireLen() int {
	return headerLen(p.Has) + len(p.Payload) + padLen(len(p.Payload)) + ICRCLen
}

// AppendWire appends p's RoCEv2 UDP payload to dst: BTH, the extension headers its opcode
// carries, payload, pad and the ICRC computed over the pseudo-headers that RoCEv2 defines for
// p.SrcIP, p.DstIP and p.SrcPort (see ICRC). BTH.PadCount is derived from the payload length,
// whatever p says. It does not allocate when dst has room for WireLen more bytes.
func (p *Packet) AppendWire(dst []byte) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return dst, fmt.Errorf("roce: marshal: %w", err)
	}
	start := len(dst)
	dst = p.appendHeaders(dst)
	dst = append(dst, p.Payload...)
	for range padLen(len(p.Payload)) {
		dst = append(dst, 0)
	}
	crc := ICRC(p.SrcIP, p.DstIP, p.SrcPort, dst[start:])
	return binary.LittleEndian.AppendUint32(dst, crc), nil
}

// appendHeaders appends BTH and the extension headers in IBA order (BTH, RETH, AtomicETH,
// AETH, AtomicAckETH, ImmDt).
func (p *Packet) appendHeaders(b []byte) []byte {
	h := &p.BTH
	var b1 byte
	if h.SE {
		b1 |= 0x80
	}
	if h.MigReq {
		b1 |= 0x40
	}
	b1 |= byte(padLen(len(p.Payload))) << 4
	b1 |= h.TVer & 0x0f
	var b4 byte
	if h.FECN {
		b4 |= 0x80
	}
	if h.BECN {
		b4 |= 0x40
	}
	var b8 byte
	if h.AckReq {
		b8 = 0x80
	}
	b = append(b, byte(h.Opcode), b1)
	b = binary.BigEndian.AppendUint16(b, h.PKey)
	b = binary.BigEndian.AppendUint32(b, uint32(b4)<<24|h.DestQP&0xffffff)
	b = binary.BigEndian.AppendUint32(b, uint32(b8)<<24|h.PSN&0xffffff)
	if p.Has&HasRETH != 0 {
		b = binary.BigEndian.AppendUint64(b, p.RETH.VA)
		b = binary.BigEndian.AppendUint32(b, p.RETH.RKey)
		b = binary.BigEndian.AppendUint32(b, p.RETH.DMALen)
	}
	if p.Has&HasAtomicETH != 0 {
		a := &p.AtomicETH
		b = binary.BigEndian.AppendUint64(b, a.VA)
		b = binary.BigEndian.AppendUint32(b, a.RKey)
		b = binary.BigEndian.AppendUint64(b, a.SwapOrAdd)
		b = binary.BigEndian.AppendUint64(b, a.Compare)
	}
	if p.Has&HasAETH != 0 {
		b = binary.BigEndian.AppendUint32(b, uint32(p.AETH.Syndrome)<<24|p.AETH.MSN&0xffffff)
	}
	if p.Has&HasAtomicAckETH != 0 {
		b = binary.BigEndian.AppendUint64(b, p.AtomicAck)
	}
	if p.Has&HasImm != 0 {
		b = binary.BigEndian.AppendUint32(b, p.Imm)
	}
	return b
}

// Unmarshal decodes a RoCEv2 UDP payload received from src:srcPort at dst into p and checks
// its ICRC. p.Payload aliases b (no copy): the caller keeps b alive and unmodified while p is
// in use. Every field of p is overwritten.
func Unmarshal(b []byte, src, dst netip.Addr, srcPort uint16, p *Packet) error {
	if err := decode(b, p); err != nil {
		return err
	}
	if _, err := family(src, dst); err != nil {
		return fmt.Errorf("roce: unmarshal: %w", err)
	}
	n := len(b) - ICRCLen
	want := ICRC(src, dst, srcPort, b[:n])
	if got := binary.LittleEndian.Uint32(b[n:]); got != want {
		return fmt.Errorf("roce: unmarshal %v psn %d: icrc %#08x, computed %#08x: %w", p.BTH.Opcode, p.BTH.PSN, got, want, ErrICRC)
	}
	p.SrcIP, p.DstIP, p.SrcPort = src, dst, srcPort
	return nil
}

// decode parses BTH, extension headers and payload without checking the ICRC.
func decode(b []byte, p *Packet) error {
	*p = Packet{}
	if len(b) < BTHLen+ICRCLen {
		return fmt.Errorf("roce: unmarshal: %d bytes: %w", len(b), ErrTruncated)
	}
	h := &p.BTH
	h.Opcode = Opcode(b[0])
	if !h.Opcode.Valid() {
		return fmt.Errorf("roce: unmarshal: opcode %#02x: %w", b[0], ErrOpcode)
	}
	h.SE = b[1]&0x80 != 0
	h.MigReq = b[1]&0x40 != 0
	h.PadCount = b[1] >> 4 & 3
	h.TVer = b[1] & 0x0f
	if h.TVer != 0 {
		return fmt.Errorf("roce: unmarshal: tver %d: %w", h.TVer, ErrTVer)
	}
	h.PKey = binary.BigEndian.Uint16(b[2:])
	h.FECN = b[4]&0x80 != 0
	h.BECN = b[4]&0x40 != 0
	h.DestQP = binary.BigEndian.Uint32(b[4:]) & 0xffffff
	h.AckReq = b[8]&0x80 != 0
	h.PSN = binary.BigEndian.Uint32(b[8:]) & 0xffffff

	p.Has = h.Opcode.Headers()
	hl := headerLen(p.Has)
	end := len(b) - ICRCLen
	if end < hl+int(h.PadCount) {
		return fmt.Errorf("roce: unmarshal %v: %d bytes, headers and pad need %d: %w", h.Opcode, len(b), hl+int(h.PadCount)+ICRCLen, ErrTruncated)
	}
	if (end-hl)%4 != 0 {
		return fmt.Errorf("roce: unmarshal %v: payload and pad of %d bytes, not a multiple of 4: %w", h.Opcode, end-hl, ErrHeaders)
	}
	off := BTHLen
	if p.Has&HasRETH != 0 {
		p.RETH.VA = binary.BigEndian.Uint64(b[off:])
		p.RETH.RKey = binary.BigEndian.Uint32(b[off+8:])
		p.RETH.DMALen = binary.BigEndian.Uint32(b[off+12:])
		off += RETHLen
	}
	if p.Has&HasAtomicETH != 0 {
		a := &p.AtomicETH
		a.VA = binary.BigEndian.Uint64(b[off:])
		a.RKey = binary.BigEndian.Uint32(b[off+8:])
		a.SwapOrAdd = binary.BigEndian.Uint64(b[off+12:])
		a.Compare = binary.BigEndian.Uint64(b[off+20:])
		off += AtomicETHLen
	}
	if p.Has&HasAETH != 0 {
		v := binary.BigEndian.Uint32(b[off:])
		p.AETH.Syndrome = uint8(v >> 24)
		p.AETH.MSN = v & 0xffffff
		off += AETHLen
	}
	if p.Has&HasAtomicAckETH != 0 {
		p.AtomicAck = binary.BigEndian.Uint64(b[off:])
		off += AtomicAckETHLen
	}
	if p.Has&HasImm != 0 {
		p.Imm = binary.BigEndian.Uint32(b[off:])
		off += ImmLen
	}
	payload := b[off : end-int(h.PadCount)]
	if len(payload) != 0 {
		if !h.Opcode.HasPayload() {
			return fmt.Errorf("roce: unmarshal %v: %d payload bytes on an opcode without payload: %w", h.Opcode, len(payload), ErrHeaders)
		}
		p.Payload = payload
	}
	return nil
}
