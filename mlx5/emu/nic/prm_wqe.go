package nic

import (
	"encoding/binary"
	"errors"

	"github.com/shift-rdma/shift/mlx5"
)

// The device's own reading of the work queues, from the PRM layouts alone (struct
// mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg, mlx5_wqe_atomic_seg, mlx5_wqe_data_seg and the
// inline segment of mlx5dv.h, all big-endian): it shares no ring code with package mlx5,
// which the providers write WQEs with, so a mistake in one is seen by the other (and Debian's
// libmlx5, which writes WQEs with code nobody here wrote, checks both). Only constants
// (opcodes, bits) come from package mlx5, which the mlx5dv.h oracle checks.

const (
	wqeBB       = 64         // MLX5_SEND_WQE_BB
	segSize     = 16         // one data-sized unit of a WQE (DS counts them)
	dsMask      = 0x3f       // the DS field of qpn_ds
	inlineBit   = 0x80000000 // MLX5_INLINE_SEG in an inline segment's byte_count
	invalidLKey = 0x100      // MLX5_INVALID_LKEY: ends a receive WQE's scatter list
)

var errMalformed = errors.New("malformed WQE")

// wqeCtrl is the control segment (struct mlx5_wqe_ctrl_seg).
type wqeCtrl struct {
	opcode mlx5.Opcode
	index  uint16 // wqe_index
	qpn    uint32
	ds     uint8 // 16-byte units of the WQE, this segment included
	fmCESE uint8
	imm    uint32 // as the big-endian value software wrote
}

func (c *wqeCtrl) signaled() bool  { return c.fmCESE&mlx5.CtrlCEMask == mlx5.CtrlCQUpdate }
func (c *wqeCtrl) fenced() bool    { return c.fmCESE&mlx5.CtrlFenceMask == mlx5.CtrlFence }
func (c *wqeCtrl) solicited() bool { return c.fmCESE&mlx5.CtrlSolicited != 0 }

// wqeData is one gather or scatter entry (struct mlx5_wqe_data_seg).
type wqeData struct {
	byteCount uint32
	lkey      uint32
	addr      uint64
}

func decodeData(b []byte) wqeData {
	return wqeData{byteCount: binary.BigEndian.Uint32(b[0:]), lkey: binary.BigEndian.Uint32(b[4:]), addr: binary.BigEndian.Uint64(b[8:])}
}

// maxSendData bounds the gather entries of one send WQE: DS is 6 bits, less the control
// segment.
const maxSendData = dsMask

// sendWQE is a send WQE as the device reads it.
type sendWQE struct {
	ctrl      wqeCtrl
	bbs       int // basic blocks the WQE occupies
	hasRaddr  bool
	raddr     uint64
	rkey      uint32
	hasAtomic bool
	swapAdd   uint64
	compare   uint64
	inline    bool
	inlineLen int
	inlineOff int // ring offset of the inline payload
	numData   int
	data      [maxSendData]wqeData
}

// sendRing is a send queue: wqeCnt basic blocks of 64 bytes, a power of two.
type sendRing struct {
	buf    []byte
	wqeCnt uint32
}

func newSendRing(buf []byte, wqeCnt int) (*sendRing, error) {
	if wqeCnt <= 0 || wqeCnt&(wqeCnt-1) != 0 || len(buf) != wqeCnt*wqeBB {
		return nil, errors.New("send ring geometry")
	}
	return &sendRing{buf: buf, wqeCnt: uint32(wqeCnt)}, nil
}

// unit is the i-th 16-byte unit of the WQE at ring offset off, wrapping at the ring's end.
func (r *sendRing) unit(off, i int) []byte {
	o := (off + i*segSize) % len(r.buf)
	return r.buf[o : o+segSize]
}

// segmentsFor says which segments follow the control segment for an opcode (the WQE
// layouts of the PRM's send opcodes), and whether the device executes the opcode at all.
func segmentsFor(op mlx5.Opcode) (raddr, atomic, ok bool) {
	switch op {
	case mlx5.OpcodeNOP, mlx5.OpcodeSend, mlx5.OpcodeSendImm, mlx5.OpcodeSendInval:
		return false, false, true
	case mlx5.OpcodeRDMAWrite, mlx5.OpcodeRDMAWriteImm, mlx5.OpcodeRDMARead:
		return true, false, true
	case mlx5.OpcodeAtomicCS, mlx5.OpcodeAtomicFA:
		return true, true, true
	}
	return false, false, false
}

// parse reads the WQE at basic block idx into w. An error means the WQE is malformed (DS 0
// or beyond the ring, an opcode the device does not execute, segments that do not fit); w.bbs
// then says how far to skip when the DS was readable.
func (r *sendRing) parse(idx uint32, w *sendWQE) error {
	off := int(idx&(r.wqeCnt-1)) * wqeBB
	c := r.unit(off, 0)
	w0, w1 := binary.BigEndian.Uint32(c[0:]), binary.BigEndian.Uint32(c[4:])
	*w = sendWQE{ctrl: wqeCtrl{opcode: mlx5.Opcode(w0), index: uint16(w0 >> 8), qpn: w1 >> 8, ds: uint8(w1),
		fmCESE: c[11], imm: binary.BigEndian.Uint32(c[12:])}}
	ds := int(w.ctrl.ds)
	if ds == 0 || ds > dsMask {
		return errMalformed
	}
	w.bbs = (ds*segSize + wqeBB - 1) / wqeBB
	if w.bbs > int(r.wqeCnt) {
		w.bbs = 0
		return errMalformed
	}
	raddr, atomic, ok := segmentsFor(w.ctrl.opcode)
	if !ok {
		return errMalformed
	}
	u := 1
	if raddr {
		if u >= ds {
			return errMalformed
		}
		s := r.unit(off, u)
		w.hasRaddr, w.raddr, w.rkey = true, binary.BigEndian.Uint64(s[0:]), binary.BigEndian.Uint32(s[8:])
		u++
	}
	if atomic {
		if u >= ds {
			return errMalformed
		}
		s := r.unit(off, u)
		w.hasAtomic, w.swapAdd, w.compare = true, binary.BigEndian.Uint64(s[0:]), binary.BigEndian.Uint64(s[8:])
		u++
	}
	if u < ds {
		s := r.unit(off, u)
		if bc := binary.BigEndian.Uint32(s[0:]); bc&inlineBit != 0 {
			// An inline segment: a 4-byte header, then the payload, padded to 16 bytes,
			// and nothing after it.
			n := int(bc &^ inlineBit)
			if n == 0 || u+(n+4+segSize-1)/segSize != ds {
				return errMalformed
			}
			w.inline, w.inlineLen = true, n
			w.inlineOff = (off + u*segSize + 4) % len(r.buf)
			return nil
		}
	}
	for ; u < ds; u++ {
		w.data[w.numData] = decodeData(r.unit(off, u))
		w.numData++
	}
	return nil
}

// copyInline copies a parsed WQE's inline payload into dst (wrapping at the ring's end).
func (r *sendRing) copyInline(w *sendWQE, dst []byte) int {
	n := min(len(dst), w.inlineLen)
	c := copy(dst[:n], r.buf[w.inlineOff:])
	if c < n {
		c += copy(dst[c:n], r.buf)
	}
	return c
}

// recvRing is a receive queue: n WQEs of 1<<shift bytes, each a list of data segments.
type recvRing struct {
	buf   []byte
	n     uint32
	shift uint
}

func newRecvRing(buf []byte, n, shift int) (*recvRing, error) {
	if n <= 0 || n&(n-1) != 0 || shift < 4 || len(buf) != n<<shift {
		return nil, errors.New("receive ring geometry")
	}
	return &recvRing{buf: buf, n: uint32(n), shift: uint(shift)}, nil
}

// parse reads the scatter list of the receive WQE at idx into dst: entries up to one whose
// lkey is MLX5_INVALID_LKEY or the end of the stride. More entries than dst holds is an error.
func (r *recvRing) parse(idx uint32, dst []wqeData) (int, error) {
	off := int(idx&(r.n-1)) << r.shift
	stride := r.buf[off : off+1<<r.shift]
	n := 0
	for i := 0; i+segSize <= len(stride); i += segSize {
		d := decodeData(stride[i:])
		if d.lkey == invalidLKey {
			break
		}
		if n == len(dst) {
			return n, errMalformed
		}
		dst[n] = d
		n++
	}
	return n, nil
}
