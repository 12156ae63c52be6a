package mlx5

import "encoding/binary"

// FastWQE writes one send WQE like WQEBuilder, for a caller that has already checked the WQE
// against the QP's limits (segment count, inline size, room in the ring): it does no checking
// of its own, so it has no error path, and it writes each 16-byte segment as two big-endian
// 64-bit stores. The bytes it writes are exactly WQEBuilder's (wqe_fast_test.go compares them
// for random WQEs); the segment layouts are those of CtrlSeg, RaddrSeg, AtomicSeg, DataSeg and
// the inline header documented there. Like WQEBuilder it is a value on the caller's stack.
//
// Segments are appended in the order the opcode needs them (remote address, atomic, then data
// or inline). Inline data, when present, must come last: Finish closes the inline segment, and
// a Raddr, Atomic or Data after Inline is not supported (keeping that check out of the
// per-segment path lets it inline).
type FastWQE struct {
	q      *SQ
	start  int // ring offset of the control segment
	off    int // ring offset of the next segment (may equal len(buf): wraps on use)
	ds     int // 16-byte units so far, control segment included
	inlOff int // ring offset of the open inline header, -1 when none
	inlLen int
}

// Begin starts a WQE on q at its current producer position; see FastWQE for what the caller
// must have checked. It initialises w in place: a FastWQE returned by value and copied with
// 16-byte moves right after being written with 8-byte stores stalls store forwarding, which
// cost more than all of a WQE's segment stores.
func (w *FastWQE) Begin(q *SQ) {
	o := int(q.curPost&(q.wqeCnt-1)) * SendWQEBB
	w.q, w.start, w.off, w.ds, w.inlOff, w.inlLen = q, o, o+CtrlSegSize, 1, -1, 0
}

// put16 writes the 16 bytes hi, lo (each big-endian) as the next segment, wrapping at the end
// of the ring.
func (w *FastWQE) put16(hi, lo uint64) {
	buf := w.q.buf
	off := w.off & (len(buf) - 1) // the ring is a power of two in size
	b := buf[off : off+SegSize : off+SegSize]
	binary.BigEndian.PutUint64(b[0:8], hi)
	binary.BigEndian.PutUint64(b[8:16], lo)
	w.off = off + SegSize
	w.ds++
}

// Raddr appends a remote-address segment (RaddrSeg.Put: raddr, rkey, a zero reserved word).
func (w *FastWQE) Raddr(addr uint64, rkey uint32) { w.put16(addr, uint64(rkey)<<32) }

// Atomic appends an atomic segment (AtomicSeg.Put: swap_add, compare).
func (w *FastWQE) Atomic(swapAdd, compare uint64) { w.put16(swapAdd, compare) }

// Data appends a gather entry (DataSeg.Put: byte_count, lkey, addr); a zero byteCount is
// skipped, as WQEBuilder.Data and rdma-core do.
func (w *FastWQE) Data(byteCount, lkey uint32, addr uint64) {
	if byteCount == 0 {
		return
	}
	w.put16(uint64(byteCount)<<32|uint64(lkey), addr)
}

// Inline appends p to the WQE's inline data segment, opening it on first use, copying now and
// wrapping at the end of the ring (WQEBuilder.Inline without the size check).
func (w *FastWQE) Inline(p []byte) {
	buf := w.q.buf
	if w.inlOff < 0 {
		if w.off == len(buf) {
			w.off = 0
		}
		w.inlOff = w.off
	}
	pos := w.inlOff + InlineHdrSize + w.inlLen
	if pos >= len(buf) {
		pos -= len(buf)
	}
	n := copy(buf[pos:], p)
	if n < len(p) {
		copy(buf, p[n:])
	}
	w.inlLen += len(p)
}

// closeInline writes the inline header and accounts for the segment (set_data_inl_seg).
func (w *FastWQE) closeInline() {
	if w.inlLen > 0 {
		binary.BigEndian.PutUint32(w.q.buf[w.inlOff:w.inlOff+4], uint32(w.inlLen)|InlineSeg)
		units := (w.inlLen + InlineHdrSize + SegSize - 1) / SegSize
		w.ds += units
		w.off = w.inlOff + units*SegSize
		if w.off > len(w.q.buf) {
			w.off -= len(w.q.buf)
		}
	}
	w.inlOff, w.inlLen = -1, 0
}

// Finish writes the control segment (opmod 0, the WQE index and DS from the builder, the
// QPN's low 24 bits, signature and DCI stream id 0, fmCESE, imm as its big-endian value) and
// advances the producer counter by the basic blocks used, as WQEBuilder.Finish does for a
// CtrlSeg holding only Opcode, QPN, FMCESE and Imm.
func (w *FastWQE) Finish(op Opcode, qpn uint32, fmCESE uint8, imm uint32) Posted {
	if w.inlOff >= 0 {
		w.closeInline()
	}
	q := w.q
	idx := uint16(q.curPost)
	hi := uint64(uint32(idx)<<8|uint32(op))<<32 | uint64((qpn&qpnMask)<<8|uint32(uint8(w.ds)))
	lo := uint64(fmCESE)<<32 | uint64(imm)
	b := q.buf[w.start : w.start+CtrlSegSize : w.start+CtrlSegSize]
	binary.BigEndian.PutUint64(b[0:8], hi)
	binary.BigEndian.PutUint64(b[8:16], lo)
	bbs := (w.ds*SegSize + SendWQEBB - 1) / SendWQEBB
	q.curPost += uint32(bbs)
	return Posted{Offset: w.start, WQEIndex: idx, DS: uint8(w.ds), BBs: uint8(bbs)}
}
