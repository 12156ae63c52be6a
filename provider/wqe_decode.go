package provider

import (
	"fmt"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// mlx5ToWR inverts wrToMlx5.
var mlx5ToWR = func() map[mlx5.Opcode]verbs.WROpcode {
	m := make(map[mlx5.Opcode]verbs.WROpcode, len(wrToMlx5))
	for wr, op := range wrToMlx5 {
		m[op] = verbs.WROpcode(wr)
	}
	return m
}()

// DecodedWQE is a send WQE read back as the WR that posted it.
type DecodedWQE struct {
	// WR has the WQE's opcode, flags (signaled, solicited, fence, inline), immediate, remote
	// address and key, atomic operands and gather list. For an inline WQE the SGL has one
	// entry with no key whose bytes are Inline (a copy); WRID is left zero (the ring does
	// not carry it: SendWQE.WRID does).
	WR     verbs.SendWR
	Inline []byte
	// Length is the bytes the WQE moves: the gather list's or the inline data's (8 for an
	// atomic), what a remote key must cover.
	Length uint64
}

// DecodeSendWQE parses an unwrapped send WQE (ReadSendWQE) of the opcodes PostSend writes.
// It allocates the gather list and the inline copy.
func DecodeSendWQE(wqe []byte) (DecodedWQE, error) { return DecodeSendWQEInto(wqe, nil) }

// DecodeSendWQEInto is DecodeSendWQE with the gather list written into sgl's array when its
// capacity holds it (WR.SGL is then sgl[:n]), so that a caller decoding many WQEs can give
// them one array. An inline WQE's one entry is allocated as before.
func DecodeSendWQEInto(wqe []byte, sgl []verbs.SGE) (DecodedWQE, error) {
	var d DecodedWQE
	c, err := mlx5.DecodeCtrlSeg(wqe)
	if err != nil {
		return d, fmt.Errorf("provider: decode WQE: %w", err)
	}
	op, ok := mlx5ToWR[c.Opcode]
	if !ok || int(c.DS)*mlx5.SegSize > len(wqe) {
		return d, fmt.Errorf("provider: decode WQE: %w: opcode %#x, DS %d, %d bytes", verbs.ErrInvalidArgument, c.Opcode, c.DS, len(wqe))
	}
	wqe = wqe[:int(c.DS)*mlx5.SegSize]
	w := &d.WR
	w.Opcode = op
	if c.Signaled() {
		w.Flags |= verbs.SendSignaled
	}
	if c.Solicited() {
		w.Flags |= verbs.SendSolicited
	}
	if c.Fenced() {
		w.Flags |= verbs.SendFence
	}
	if op == verbs.WRSendWithImm || op == verbs.WRRDMAWriteWithImm {
		w.Imm = c.Imm
	}
	raddr, atomic, _ := c.Opcode.Segments()
	o := mlx5.CtrlSegSize
	if raddr {
		r, err := mlx5.DecodeRaddrSeg(wqe[o:])
		if err != nil {
			return d, fmt.Errorf("provider: decode WQE: %w", err)
		}
		w.RemoteAddr, w.RKey = r.RemoteAddr, r.RKey
		o += mlx5.RaddrSegSize
	}
	if atomic {
		a, err := mlx5.DecodeAtomicSeg(wqe[o:])
		if err != nil {
			return d, fmt.Errorf("provider: decode WQE: %w", err)
		}
		if op == verbs.WRAtomicCmpAndSwp {
			w.Swap, w.CompareAdd = a.SwapAdd, a.Compare
		} else {
			w.CompareAdd = a.SwapAdd
		}
		o += mlx5.AtomicSegSize
	}
	for o+4 <= len(wqe) {
		if !mlx5.IsInline(wqe[o:]) {
			break
		}
		n := int(mlx5.InlineLen(wqe[o:]))
		if o+mlx5.InlineHdrSize+n > len(wqe) {
			return d, fmt.Errorf("provider: decode WQE: %w: %d inline bytes past the WQE's end", verbs.ErrInvalidArgument, n)
		}
		d.Inline = append(d.Inline, wqe[o+mlx5.InlineHdrSize:o+mlx5.InlineHdrSize+n]...)
		o += mlx5.InlineDS(n) * mlx5.SegSize
	}
	if d.Inline != nil {
		w.Flags |= verbs.SendInline
		w.SGL = []verbs.SGE{{Addr: sliceAddr(d.Inline), Length: uint32(len(d.Inline))}}
		d.Length = uint64(len(d.Inline))
	} else {
		w.SGL = sgl[:0]
		for ; o+mlx5.DataSegSize <= len(wqe); o += mlx5.DataSegSize {
			s, _ := mlx5.DecodeDataSeg(wqe[o:])
			w.SGL = append(w.SGL, verbs.SGE{Addr: s.Addr, Length: s.ByteCount, LKey: s.LKey})
			d.Length += uint64(s.ByteCount)
		}
		if len(w.SGL) == 0 {
			w.SGL = nil // as DecodeSendWQE gives it
		}
	}
	if atomic {
		d.Length = mlx5.AtomicSize
	}
	return d, nil
}
