package mlx5

import "encoding/binary"

// Sizes of the send WQE segments.
const (
	CtrlSegSize   = 16 // sizeof(struct mlx5_wqe_ctrl_seg)
	RaddrSegSize  = 16 // sizeof(struct mlx5_wqe_raddr_seg)
	AtomicSegSize = 16 // sizeof(struct mlx5_wqe_atomic_seg)
	DataSegSize   = 16 // sizeof(struct mlx5_wqe_data_seg)
	InlineHdrSize = 4  // sizeof(struct mlx5_wqe_inline_seg), rdma-core providers/mlx5/wqe.h
)

// CtrlSeg is struct mlx5_wqe_ctrl_seg (infiniband/mlx5dv.h), the first 16 bytes of every send
// WQE:
//
//	0  __be32 opmod_idx_opcode   opmod<<24 | wqe_index<<8 | opcode
//	4  __be32 qpn_ds             qpn<<8 | ds
//	8  u8     signature
//	9  __be16 dci_stream_channel_id
//	11 u8     fm_ce_se
//	12 __be32 imm
//
// The first 8 bytes are also what the 8-byte UAR doorbell carries.
type CtrlSeg struct {
	Opmod     uint8
	WQEIndex  uint16 // sq cur_post & 0xffff at the time the WQE was built
	Opcode    Opcode
	QPN       uint32 // 24 bits
	DS        uint8  // WQE size in 16-byte units, all segments included
	Signature uint8
	// DCIStreamChannelID is meaningful for DCI QPs only; RC leaves it zero.
	DCIStreamChannelID uint16
	FMCESE             uint8 // fence mode | completion mode | solicited (Ctrl* flags)
	// Imm is immediate data (SEND_IMM, RDMA_WRITE_IMM) or the invalidated rkey, as the
	// big-endian value of the wire field: Imm 0x01020304 travels as bytes 01 02 03 04.
	Imm uint32
}

// Put writes c into b[0:16]. It panics if b is shorter, like any slice index.
func (c *CtrlSeg) Put(b []byte) {
	_ = b[15]
	binary.BigEndian.PutUint32(b[0:], uint32(c.Opmod)<<24|uint32(c.WQEIndex)<<8|uint32(c.Opcode))
	binary.BigEndian.PutUint32(b[4:], c.QPN<<8|uint32(c.DS))
	b[8] = c.Signature
	binary.BigEndian.PutUint16(b[9:], c.DCIStreamChannelID)
	b[11] = c.FMCESE
	binary.BigEndian.PutUint32(b[12:], c.Imm)
}

// DecodeCtrlSeg parses a control segment.
func DecodeCtrlSeg(b []byte) (CtrlSeg, error) {
	if len(b) < CtrlSegSize {
		return CtrlSeg{}, shortErr("decode ctrl seg", len(b), CtrlSegSize)
	}
	w0 := binary.BigEndian.Uint32(b[0:])
	w1 := binary.BigEndian.Uint32(b[4:])
	return CtrlSeg{
		Opmod:              uint8(w0 >> 24),
		WQEIndex:           uint16(w0 >> 8),
		Opcode:             Opcode(w0),
		QPN:                w1 >> 8,
		DS:                 uint8(w1),
		Signature:          b[8],
		DCIStreamChannelID: binary.BigEndian.Uint16(b[9:]),
		FMCESE:             b[11],
		Imm:                binary.BigEndian.Uint32(b[12:]),
	}, nil
}

// Signaled reports whether the WQE asks for a CQE on success.
func (c *CtrlSeg) Signaled() bool { return c.FMCESE&CtrlCEMask == CtrlCQUpdate }

// Solicited reports whether the WQE asks the responder for a solicited event.
func (c *CtrlSeg) Solicited() bool { return c.FMCESE&CtrlSolicited != 0 }

// Fenced reports whether the WQE waits for prior RDMA READs and atomics (IBV_SEND_FENCE).
func (c *CtrlSeg) Fenced() bool { return c.FMCESE&CtrlFenceMask == CtrlFence }

// RaddrSeg is struct mlx5_wqe_raddr_seg (infiniband/mlx5dv.h): the remote address and key of
// an RDMA or atomic operation.
//
//	0 __be64 raddr
//	8 __be32 rkey
//	12 __be32 reserved
type RaddrSeg struct {
	RemoteAddr uint64
	RKey       uint32
}

// Put writes r into b[0:16], zeroing the reserved word as set_raddr_seg does.
func (r *RaddrSeg) Put(b []byte) {
	_ = b[15]
	binary.BigEndian.PutUint64(b[0:], r.RemoteAddr)
	binary.BigEndian.PutUint32(b[8:], r.RKey)
	binary.BigEndian.PutUint32(b[12:], 0)
}

// DecodeRaddrSeg parses a remote-address segment.
func DecodeRaddrSeg(b []byte) (RaddrSeg, error) {
	if len(b) < RaddrSegSize {
		return RaddrSeg{}, shortErr("decode raddr seg", len(b), RaddrSegSize)
	}
	return RaddrSeg{RemoteAddr: binary.BigEndian.Uint64(b[0:]), RKey: binary.BigEndian.Uint32(b[8:])}, nil
}

// AtomicSeg is struct mlx5_wqe_atomic_seg (infiniband/mlx5dv.h).
//
//	0 __be64 swap_add   swap value (CS) or the addend (FA)
//	8 __be64 compare    compare value (CS); unused by FA
type AtomicSeg struct {
	SwapAdd uint64
	Compare uint64
}

// Put writes a into b[0:16].
func (a *AtomicSeg) Put(b []byte) {
	_ = b[15]
	binary.BigEndian.PutUint64(b[0:], a.SwapAdd)
	binary.BigEndian.PutUint64(b[8:], a.Compare)
}

// DecodeAtomicSeg parses an atomic segment.
func DecodeAtomicSeg(b []byte) (AtomicSeg, error) {
	if len(b) < AtomicSegSize {
		return AtomicSeg{}, shortErr("decode atomic seg", len(b), AtomicSegSize)
	}
	return AtomicSeg{SwapAdd: binary.BigEndian.Uint64(b[0:]), Compare: binary.BigEndian.Uint64(b[8:])}, nil
}

// CompareSwap returns the atomic segment for IBV_WR_ATOMIC_CMP_AND_SWP as rdma-core's
// _set_atomic_seg fills it.
func CompareSwap(compare, swap uint64) AtomicSeg { return AtomicSeg{SwapAdd: swap, Compare: compare} }

// FetchAdd returns the atomic segment for IBV_WR_ATOMIC_FETCH_AND_ADD; rdma-core leaves the
// compare word as it was, this encoder writes it as zero.
func FetchAdd(add uint64) AtomicSeg { return AtomicSeg{SwapAdd: add} }

// AtomicSize is the byte count of the local data segment of an atomic (MLX5_ATOMIC_SIZE).
const AtomicSize = 8

// DataSeg is struct mlx5_wqe_data_seg (infiniband/mlx5dv.h): one gather or scatter entry.
//
//	0 __be32 byte_count
//	4 __be32 lkey
//	8 __be64 addr
type DataSeg struct {
	ByteCount uint32
	LKey      uint32
	Addr      uint64
}

// Put writes d into b[0:16].
func (d *DataSeg) Put(b []byte) {
	_ = b[15]
	binary.BigEndian.PutUint32(b[0:], d.ByteCount)
	binary.BigEndian.PutUint32(b[4:], d.LKey)
	binary.BigEndian.PutUint64(b[8:], d.Addr)
}

// DecodeDataSeg parses a data segment. An inline segment (byte_count has InlineSeg set)
// decodes too; callers check IsInline first.
func DecodeDataSeg(b []byte) (DataSeg, error) {
	if len(b) < DataSegSize {
		return DataSeg{}, shortErr("decode data seg", len(b), DataSegSize)
	}
	return DataSeg{
		ByteCount: binary.BigEndian.Uint32(b[0:]),
		LKey:      binary.BigEndian.Uint32(b[4:]),
		Addr:      binary.BigEndian.Uint64(b[8:]),
	}, nil
}

// IsTerminator reports whether d ends a receive WQE's scatter list (set_data_ptr_seg_end and
// mlx5_post_recv write byte_count 0, lkey MLX5_INVALID_LKEY, addr 0).
func (d *DataSeg) IsTerminator() bool { return d.LKey == InvalidLKey && d.ByteCount == 0 }

// TerminatorSeg is the scatter-list terminator of a receive WQE.
var TerminatorSeg = DataSeg{LKey: InvalidLKey}

// IsInline reports whether the segment at b is an inline data header (MLX5_INLINE_SEG set in
// its first big-endian word). b must hold at least 4 bytes.
func IsInline(b []byte) bool { return binary.BigEndian.Uint32(b)&InlineSeg != 0 }

// PutInlineHeader writes struct mlx5_wqe_inline_seg for n bytes of inline data:
// byte_count = n | MLX5_INLINE_SEG, big-endian.
func PutInlineHeader(b []byte, n uint32) {
	binary.BigEndian.PutUint32(b, n|InlineSeg)
}

// InlineLen returns the data length of an inline header.
func InlineLen(b []byte) uint32 { return binary.BigEndian.Uint32(b) &^ InlineSeg }

// InlineDS is the number of 16-byte units an inline segment with n data bytes occupies: the
// 4-byte header plus the data, rounded up to 16 (set_data_inl_seg). n == 0 takes no space,
// as rdma-core emits no inline segment then.
func InlineDS(n int) int {
	if n == 0 {
		return 0
	}
	return (n + InlineHdrSize + SegSize - 1) / SegSize
}

// WQEBBs is the number of 64-byte basic blocks a WQE of ds 16-byte units occupies
// (DIV_ROUND_UP(size*16, MLX5_SEND_WQE_BB)).
func WQEBBs(ds int) int { return (ds*SegSize + SendWQEBB - 1) / SendWQEBB }
