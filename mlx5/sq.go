package mlx5

import (
	"golang.org/x/sys/unix"
)

// SQ is a send queue ring over the caller's memory: wqeCnt basic blocks of 64 bytes. A WQE
// starts on a basic block and may span several; a WQE that reaches the end of the buffer
// continues at its start, segment by segment (and byte by byte for inline data), as
// _mlx5_post_send does with qend. The producer side (the provider) builds WQEs with Begin and
// rings with BFReg.Ring; the device side parses them with Parse.
type SQ struct {
	buf     []byte
	wqeCnt  uint32
	curPost uint32
	// MaxInline is the largest inline payload Inline accepts (the QP's max_inline_data).
	MaxInline int
}

// NewSQ wraps buf, which must be wqeCnt*64 bytes, wqeCnt a power of two, 8-byte aligned.
func NewSQ(buf []byte, wqeCnt int) (*SQ, error) {
	if wqeCnt <= 0 || wqeCnt&(wqeCnt-1) != 0 || wqeCnt > 1<<16 || len(buf) != wqeCnt*SendWQEBB || !aligned(buf, 8) {
		return nil, newErr("new sq", ErrGeometry, unix.EINVAL, "%d WQEBBs over %d bytes", wqeCnt, len(buf))
	}
	return &SQ{buf: buf, wqeCnt: uint32(wqeCnt)}, nil
}

// WQECount is the number of 64-byte basic blocks.
func (q *SQ) WQECount() int { return int(q.wqeCnt) }

// Buf is the ring memory.
func (q *SQ) Buf() []byte { return q.buf }

// CurPost is the producer counter in basic blocks (sq.cur_post); its low 16 bits are the
// WQE index written into control segments and the doorbell record.
func (q *SQ) CurPost() uint32 { return q.curPost }

// SetCurPost moves the producer counter, for a QP reset or when rewinding unposted WQEs.
func (q *SQ) SetCurPost(v uint32) { q.curPost = v }

// CurPostWord is the address of the producer counter, for a second poster of the same ring
// outside Go (the plugin's C post_send): the two take turns, and each one's stores must be
// visible to the next (the caller's synchronisation, not this package's).
func (q *SQ) CurPostWord() *uint32 { return &q.curPost }

// Offset is the byte offset of basic block index idx (masked to the ring).
func (q *SQ) Offset(idx uint32) int { return int(idx&(q.wqeCnt-1)) * SendWQEBB }

// Posted describes a finished WQE.
type Posted struct {
	Offset   int    // byte offset of its control segment
	WQEIndex uint16 // its index (cur_post & 0xffff when it was built)
	DS       uint8  // its size in 16-byte units
	BBs      uint8  // basic blocks it occupies
}

// WQEBuilder writes one WQE segment by segment. It is a value on the caller's stack; nothing
// allocates.
type WQEBuilder struct {
	q       *SQ
	start   int
	off     int
	ds      int
	inlOff  int // offset of the open inline header, -1 when none
	inlLen  int
	overrun bool
}

// Begin starts a WQE at the current producer position. Space is the caller's business: it
// must know (from completions) that the basic blocks the WQE will use are free.
func (q *SQ) Begin() WQEBuilder {
	o := q.Offset(q.curPost)
	return WQEBuilder{q: q, start: o, off: o + CtrlSegSize, ds: 1, inlOff: -1}
}

// next returns the next 16 bytes of the WQE, wrapping at the end of the ring.
func (w *WQEBuilder) next() []byte {
	w.closeInline()
	if w.off == len(w.q.buf) {
		w.off = 0
	}
	if w.ds >= MaxDS {
		w.overrun = true
		return w.q.buf[w.off : w.off+SegSize : w.off+SegSize] // keeps writing in place; Finish fails
	}
	b := w.q.buf[w.off : w.off+SegSize : w.off+SegSize]
	w.off += SegSize
	w.ds++
	return b
}

// Raddr appends a remote-address segment.
func (w *WQEBuilder) Raddr(r RaddrSeg) { r.Put(w.next()) }

// Atomic appends an atomic segment.
func (w *WQEBuilder) Atomic(a AtomicSeg) { a.Put(w.next()) }

// Data appends a gather entry. rdma-core skips zero-length SGEs; so does this (a zero
// byte_count means 2 GiB to the hardware).
func (w *WQEBuilder) Data(d DataSeg) {
	if d.ByteCount == 0 {
		return
	}
	d.Put(w.next())
}

// Inline appends p to the WQE's inline data segment, opening it on first use. The data is
// copied now and may wrap around the end of the ring in the middle of a chunk.
func (w *WQEBuilder) Inline(p []byte) error {
	if w.inlLen+len(p) > w.q.MaxInline {
		return newErr("post send inline", ErrInlineTooLarge, unix.ENOMEM, "%d bytes, max %d", w.inlLen+len(p), w.q.MaxInline)
	}
	if w.inlOff < 0 {
		if w.off == len(w.q.buf) {
			w.off = 0
		}
		w.inlOff = w.off
	}
	pos := w.inlOff + InlineHdrSize + w.inlLen
	if pos >= len(w.q.buf) {
		pos -= len(w.q.buf)
	}
	for len(p) > 0 {
		n := copy(w.q.buf[pos:], p)
		p = p[n:]
		w.inlLen += n
		pos = 0
	}
	return nil
}

// closeInline writes the inline header and accounts for the segment, as set_data_inl_seg.
func (w *WQEBuilder) closeInline() {
	if w.inlOff < 0 {
		return
	}
	if w.inlLen > 0 {
		PutInlineHeader(w.q.buf[w.inlOff:], uint32(w.inlLen))
		units := InlineDS(w.inlLen)
		w.ds += units
		w.off = w.inlOff + units*SegSize
		if w.off > len(w.q.buf) {
			w.off -= len(w.q.buf)
		}
	}
	w.inlOff, w.inlLen = -1, 0
}

// DS is the size so far in 16-byte units, control segment included.
func (w *WQEBuilder) DS() int { return w.ds + InlineDS(w.inlLen) }

// Finish writes the control segment (WQEIndex and DS filled in from the builder) and advances
// the producer counter by the basic blocks used.
func (w *WQEBuilder) Finish(ctrl CtrlSeg) (Posted, error) {
	w.closeInline()
	if w.overrun || w.ds > MaxDS || WQEBBs(w.ds) > int(w.q.wqeCnt) {
		return Posted{}, newErr("post send", ErrMalformed, unix.EINVAL, "WQE of %d units exceeds the limit", w.ds)
	}
	q := w.q
	ctrl.WQEIndex = uint16(q.curPost)
	ctrl.DS = uint8(w.ds)
	ctrl.Put(q.buf[w.start : w.start+CtrlSegSize])
	bbs := WQEBBs(w.ds)
	p := Posted{Offset: w.start, WQEIndex: ctrl.WQEIndex, DS: uint8(w.ds), BBs: uint8(bbs)}
	q.curPost += uint32(bbs)
	return p, nil
}

// copyTo copies n bytes of WQE starting at ring offset from into the UAR at off, 8 bytes at
// a time with plain aligned stores (never locked ones on a UAR; see RingFast), wrapping the
// source at the end of the ring (mlx5_bf_copy).
func (q *SQ) copyTo(u UARPage, off, from, n int) {
	for i := 0; i < n; i += 8 {
		if from == len(q.buf) {
			from = 0
		}
		uarStore(u.mem, off+i, ne.Uint64(q.buf[from:from+8]))
		from += 8
	}
}

// SendWQE is a parsed send WQE as a device sees it.
type SendWQE struct {
	Ctrl      CtrlSeg
	Raddr     RaddrSeg
	Atomic    AtomicSeg
	HasRaddr  bool
	HasAtomic bool
	// Data holds the gather list (NumData entries) when the WQE is not inline.
	Data    [MaxDS - 1]DataSeg
	NumData int
	// Inline is set when the payload is inline; InlineLen bytes start at ring offset
	// inlineOff (wrapping), read them with SQ.CopyInline.
	Inline    bool
	InlineLen int
	inlineOff int
	// Offset is the ring offset of the control segment and BBs the basic blocks used.
	Offset int
	BBs    int
}

// Parse decodes the WQE at basic block idx into w, as a NIC would after a doorbell: the
// control segment, the segments its opcode implies, then data segments or one inline segment
// filling the rest of DS. It validates only structure (DS bounds, known opcode, segments that
// fit); semantic checks (keys, lengths) are the device's.
func (q *SQ) Parse(idx uint32, w *SendWQE) error {
	off := q.Offset(idx)
	ctrl, _ := DecodeCtrlSeg(q.buf[off:])
	w.Ctrl, w.Offset = ctrl, off
	w.HasRaddr, w.HasAtomic, w.Inline, w.NumData, w.InlineLen = false, false, false, 0, 0
	ds := int(ctrl.DS & MaxDS)
	if ds == 0 || ds != int(ctrl.DS) || WQEBBs(ds) > int(q.wqeCnt) {
		return newErr("parse send wqe", ErrMalformed, unix.EINVAL, "DS %d at index %d", ctrl.DS, idx)
	}
	w.BBs = WQEBBs(ds)
	raddr, atom, ok := ctrl.Opcode.Segments()
	if !ok {
		return newErr("parse send wqe", ErrMalformed, unix.EOPNOTSUPP, "opcode %v at index %d", ctrl.Opcode, idx)
	}
	seg := func(i int) []byte { // i-th 16-byte unit of the WQE, wrapped
		o := (off + i*SegSize) % len(q.buf)
		return q.buf[o : o+SegSize]
	}
	u := 1
	if raddr {
		if u >= ds {
			return newErr("parse send wqe", ErrMalformed, unix.EINVAL, "%v without remote address segment", ctrl.Opcode)
		}
		w.Raddr, _ = DecodeRaddrSeg(seg(u))
		w.HasRaddr = true
		u++
	}
	if atom {
		if u >= ds {
			return newErr("parse send wqe", ErrMalformed, unix.EINVAL, "%v without atomic segment", ctrl.Opcode)
		}
		w.Atomic, _ = DecodeAtomicSeg(seg(u))
		w.HasAtomic = true
		u++
	}
	if u < ds && IsInline(seg(u)) {
		n := int(InlineLen(seg(u)))
		if n == 0 || u+InlineDS(n) != ds {
			return newErr("parse send wqe", ErrMalformed, unix.EINVAL, "inline length %d does not fill DS %d", n, ds)
		}
		w.Inline, w.InlineLen = true, n
		w.inlineOff = (off + u*SegSize + InlineHdrSize) % len(q.buf)
		return nil
	}
	for ; u < ds; u++ {
		w.Data[w.NumData], _ = DecodeDataSeg(seg(u))
		w.NumData++
	}
	return nil
}

// CopyInline copies the inline payload of a parsed WQE into dst and returns the count copied.
func (q *SQ) CopyInline(w *SendWQE, dst []byte) int {
	if !w.Inline {
		return 0
	}
	n := min(len(dst), w.InlineLen)
	c := copy(dst[:n], q.buf[w.inlineOff:])
	if c < n {
		c += copy(dst[c:n], q.buf)
	}
	return c
}

// ReadWQE copies the whole WQE at basic block idx (DS 16-byte units, unwrapped) into dst and
// returns its length, as the kernel's mlx5_ib_read_user_wqe_sq reads a WQE that may wrap. It
// is how a caller takes an outstanding WQE out of a ring (to copy it to another QP).
func (q *SQ) ReadWQE(idx uint32, dst []byte) (int, error) {
	off := q.Offset(idx)
	ds := int(q.buf[off+7]) // low byte of qpn_ds
	n := ds * SegSize
	if ds == 0 || ds > MaxDS || WQEBBs(ds) > int(q.wqeCnt) {
		return 0, newErr("read send wqe", ErrMalformed, unix.EINVAL, "DS %d at index %d", ds, idx)
	}
	if len(dst) < n {
		return 0, shortErr("read send wqe", len(dst), n)
	}
	c := copy(dst[:n], q.buf[off:])
	copy(dst[c:n], q.buf)
	return n, nil
}

// WriteWQE writes a WQE taken with ReadWQE at the producer position, wrapping at the end of
// the ring, with the control segment's QPN and WQE index rewritten for this queue, and
// advances the producer counter. Keys inside the segments are the caller's to rewrite (Parse
// the copy, or edit it before writing). Space is the caller's business.
func (q *SQ) WriteWQE(src []byte, qpn uint32) (Posted, error) {
	if len(src) < CtrlSegSize || len(src)%SegSize != 0 {
		return Posted{}, newErr("write send wqe", ErrMalformed, unix.EINVAL, "%d bytes", len(src))
	}
	ds := len(src) / SegSize
	if ds > MaxDS || int(src[7]) != ds || WQEBBs(ds) > int(q.wqeCnt) {
		return Posted{}, newErr("write send wqe", ErrMalformed, unix.EINVAL, "%d bytes with DS %d", len(src), src[7])
	}
	ctrl, _ := DecodeCtrlSeg(src)
	off := q.Offset(q.curPost)
	c := copy(q.buf[off:], src)
	copy(q.buf, src[c:])
	ctrl.QPN = qpn & qpnMask
	ctrl.WQEIndex = uint16(q.curPost)
	ctrl.Put(q.buf[off : off+CtrlSegSize])
	bbs := WQEBBs(ds)
	p := Posted{Offset: off, WQEIndex: ctrl.WQEIndex, DS: uint8(ds), BBs: uint8(bbs)}
	q.curPost += uint32(bbs)
	return p, nil
}
