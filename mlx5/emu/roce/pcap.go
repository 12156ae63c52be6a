package roce

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// PcapWriter writes Ethernet frames in the classic libpcap file format (microsecond
// timestamps, link type 1), which tshark and Wireshark read.
type PcapWriter struct {
	w   io.Writer
	buf []byte
}

// pcap file constants (pcap-savefile(5)).
const (
	pcapMagic       = 0xa1b2c3d4
	pcapSnapLen     = 65535
	pcapLinkTypeEth = 1
)

// NewPcapWriter writes the pcap file header to w and returns a writer for its records.
func NewPcapWriter(w io.Writer) (*PcapWriter, error) {
	h := make([]byte, 0, 24)
	h = binary.LittleEndian.AppendUint32(h, pcapMagic)
	h = binary.LittleEndian.AppendUint16(h, 2) // version 2.4
	h = binary.LittleEndian.AppendUint16(h, 4)
	h = binary.LittleEndian.AppendUint32(h, 0) // thiszone
	h = binary.LittleEndian.AppendUint32(h, 0) // sigfigs
	h = binary.LittleEndian.AppendUint32(h, pcapSnapLen)
	h = binary.LittleEndian.AppendUint32(h, pcapLinkTypeEth)
	if _, err := w.Write(h); err != nil {
		return nil, fmt.Errorf("roce: pcap header: %w", err)
	}
	return &PcapWriter{w: w}, nil
}

// WriteFrame appends one record holding frame, captured at ts.
func (pw *PcapWriter) WriteFrame(ts time.Time, frame []byte) error {
	n := min(len(frame), pcapSnapLen)
	b := pw.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(ts.Unix()))
	b = binary.LittleEndian.AppendUint32(b, uint32(ts.Nanosecond()/1000))
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frame)))
	b = append(b, frame[:n]...)
	pw.buf = b
	if _, err := pw.w.Write(b); err != nil {
		return fmt.Errorf("roce: pcap record: %w", err)
	}
	return nil
}

// WritePacket writes p as an Ethernet frame between the MACs MACFor derives from its
// addresses.
func (pw *PcapWriter) WritePacket(ts time.Time, p *Packet) error {
	frame, err := p.AppendFrame(nil, MACFor(p.SrcIP), MACFor(p.DstIP))
	if err != nil {
		return err
	}
	return pw.WriteFrame(ts, frame)
}
