package provider

import (
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
)

// sendQueue is the software side of an mlx5 SQ (struct mlx5_wq + the per-WQE tables of
// struct mlx5_qp in rdma-core): a ring of 64-byte WQEBBs, the producer counter cur (cur_post,
// counting WQEBBs), the WR counters head/tail, and per-WQEBB-index tables filled at post time
// and read at completion time.
//
// Concurrency: one goroutine posts at a time (the QP's users serialise posts, as libmlx5's
// sq.lock does; SHIFT's layer above guarantees it); completions are consumed by the CQ poller,
// which publishes the retired position through the atomics tail and done.
type sendQueue struct {
	buf     []byte // wqeCnt*64 bytes of the QP buffer
	wqeCnt  uint32 // power of two
	mask    uint32
	maxPost uint32
	maxGS   int
	maxInl  int
	qpn     uint32

	cur  uint32        // producer position in WQEBBs (free running)
	rung uint32        // position the doorbell record was last set to
	head uint32        // WRs posted (free running)
	tail atomic.Uint32 // WRs retired by completions
	done atomic.Uint32 // WQEBB position after the last retired WQE

	signalAll bool
	fmCache   uint8

	// Per WQEBB index of a WQE's first block.
	wrid    []uint64 // the WR's wr_id
	wqeHead []uint32 // head value after this WR (rdma-core's wqe_head + 1)
	pos     []uint32 // full producer position of the WQE
	nbb     []uint8  // WQEBBs the WQE occupies
	// startOf maps the index of a WQE's last block to its first position, so a doorbell can
	// be rung "up to" any WQE boundary with that WQE's control segment.
	startOf []uint32
}

func newSendQueue(buf []byte, wqeCnt, maxPost uint32, maxGS, maxInl int, qpn uint32, signalAll bool) *sendQueue {
	return &sendQueue{
		buf: buf, wqeCnt: wqeCnt, mask: wqeCnt - 1, maxPost: maxPost, maxGS: maxGS,
		maxInl: maxInl, qpn: qpn, signalAll: signalAll,
		wrid: make([]uint64, wqeCnt), wqeHead: make([]uint32, wqeCnt),
		pos: make([]uint32, wqeCnt), nbb: make([]uint8, wqeCnt), startOf: make([]uint32, wqeCnt),
	}
}

// seg returns the 16-byte segment at byte offset off of the ring (mod its size). Segments
// never straddle the end because the ring is a whole number of 64-byte blocks.
func (q *sendQueue) seg(off int) []byte {
	off &= len(q.buf) - 1
	return q.buf[off : off+16 : off+16]
}

var wrToMlx5 = [...]mlx5.Opcode{
	WRRDMAWrite:        mlx5.OpcodeRDMAWrite,
	WRRDMAWriteWithImm: mlx5.OpcodeRDMAWriteImm,
	WRSend:             mlx5.OpcodeSend,
	WRSendWithImm:      mlx5.OpcodeSendImm,
	WRRDMARead:         mlx5.OpcodeRDMARead,
	WRAtomicCmpAndSwp:  mlx5.OpcodeAtomicCS,
	WRAtomicFetchAdd:   mlx5.OpcodeAtomicFA,
}

// validate checks a whole WR list against the QP limits before anything is written, so a
// rejected list leaves the ring untouched (libmlx5 posts the prefix before the bad WR; this
// provider posts nothing).
func (q *sendQueue) validate(wrs []SendWR) error {
	outstanding := q.head - q.tail.Load()
	if outstanding+uint32(len(wrs)) > q.maxPost {
		return &WRError{Op: "post_send", Index: int(q.maxPost - min(outstanding, q.maxPost)),
			Limit: int(q.maxPost), Got: int(outstanding) + len(wrs), Err: ErrSQFull}
	}
	for i := range wrs {
		wr := &wrs[i]
		if int(wr.Opcode) >= len(wrToMlx5) {
			return &WRError{Op: "post_send", Index: i, Err: ErrBadOpcode}
		}
		if len(wr.SGL) > q.maxGS {
			return &WRError{Op: "post_send", Index: i, Limit: q.maxGS, Got: len(wr.SGL), Err: ErrTooManySGE}
		}
		switch wr.Opcode {
		case WRAtomicCmpAndSwp, WRAtomicFetchAdd:
			if len(wr.SGL) != 1 || wr.SGL[0].Length != mlx5.AtomicSize {
				return &WRError{Op: "post_send", Index: i, Err: ErrBadAtomic}
			}
		}
		if wr.Flags&SendInline != 0 && isInlineable(wr.Opcode) {
			n := 0
			for _, s := range wr.SGL {
				n += int(s.Length)
			}
			if n > q.maxInl {
				return &WRError{Op: "post_send", Index: i, Limit: q.maxInl, Got: n, Err: ErrInlineTooLarge}
			}
		}
	}
	return nil
}

// isInlineable: rdma-core honours IBV_SEND_INLINE for any opcode with SGEs; for READ and
// atomics the SGE is a local destination, so inlining makes no sense and the flag is ignored.
func isInlineable(op WROpcode) bool {
	switch op {
	case WRRDMAWrite, WRRDMAWriteWithImm, WRSend, WRSendWithImm:
		return true
	}
	return false
}

// write builds the WQEs of a validated list into the ring, as _mlx5_post_send does, and
// returns the DS of the last WQE, the ring offset of its control segment and whether it was
// inline (what post_send_db needs to choose BlueFlame).
func (q *sendQueue) write(wrs []SendWR) (lastDS int, lastCtrl int, inl bool) {
	nextFence := q.fmCache
	for i := range wrs {
		wr := &wrs[i]
		var fence uint8
		if wr.Flags&SendFence != 0 {
			fence = mlx5.CtrlFence
		} else {
			fence = nextFence
		}
		nextFence = 0
		idx := q.cur & q.mask
		ctrlOff := int(idx) * mlx5.SendWQEBB
		fm := fence
		if q.signalAll || wr.Flags&SendSignaled != 0 {
			fm |= mlx5.CtrlCQUpdate
		}
		if wr.Flags&SendSolicited != 0 {
			fm |= mlx5.CtrlSolicited
		}
		off := ctrlOff + mlx5.CtrlSegSize
		ds := 1
		op := wrToMlx5[wr.Opcode]
		switch wr.Opcode {
		case WRRDMARead, WRRDMAWrite, WRRDMAWriteWithImm:
			r := mlx5.RaddrSeg{RemoteAddr: wr.RemoteAddr, RKey: wr.RKey}
			r.Put(q.seg(off))
			off += mlx5.RaddrSegSize
			ds++
		case WRAtomicCmpAndSwp, WRAtomicFetchAdd:
			r := mlx5.RaddrSeg{RemoteAddr: wr.RemoteAddr, RKey: wr.RKey}
			r.Put(q.seg(off))
			off += mlx5.RaddrSegSize
			var a mlx5.AtomicSeg
			if wr.Opcode == WRAtomicCmpAndSwp {
				a = mlx5.CompareSwap(wr.CompareAdd, wr.Swap)
			} else {
				a = mlx5.FetchAdd(wr.CompareAdd)
			}
			a.Put(q.seg(off))
			off += mlx5.AtomicSegSize
			ds += 2
		}
		inl = false
		if wr.Flags&SendInline != 0 && isInlineable(wr.Opcode) && len(wr.SGL) > 0 {
			n := q.writeInline(off, wr.SGL)
			if n > 0 {
				inl = true
				ds += mlx5.InlineDS(n)
			}
		} else {
			for _, s := range wr.SGL {
				if s.Length == 0 {
					continue // rdma-core skips empty SGEs
				}
				d := mlx5.DataSeg{ByteCount: s.Length, LKey: s.LKey, Addr: s.Addr}
				d.Put(q.seg(off))
				off += mlx5.DataSegSize
				ds++
			}
		}
		var imm uint32
		if wr.Opcode == WRSendWithImm || wr.Opcode == WRRDMAWriteWithImm {
			imm = wr.Imm
		}
		c := mlx5.CtrlSeg{WQEIndex: uint16(q.cur), Opcode: op, QPN: q.qpn, DS: uint8(ds), FMCESE: fm, Imm: imm}
		c.Put(q.buf[ctrlOff : ctrlOff+16])

		nbb := uint32(mlx5.WQEBBs(ds))
		q.head++
		q.wrid[idx] = wr.WRID
		q.wqeHead[idx] = q.head
		q.pos[idx] = q.cur
		q.nbb[idx] = uint8(nbb)
		q.startOf[(q.cur+nbb-1)&q.mask] = q.cur
		q.cur += nbb
		lastDS, lastCtrl = ds, ctrlOff
	}
	q.fmCache = nextFence
	return lastDS, lastCtrl, inl
}

// writeInline copies the SGEs' bytes after an inline header at ring offset off, wrapping at
// the end of the ring (set_data_inl_seg), and returns the data length.
func (q *sendQueue) writeInline(off int, sgl []SGE) int {
	size := len(q.buf)
	hdr := off & (size - 1)
	p := (hdr + mlx5.InlineHdrSize) & (size - 1)
	n := 0
	for _, s := range sgl {
		src := memAt(s.Addr, int(s.Length))
		for len(src) > 0 {
			c := copy(q.buf[p:], src)
			src = src[c:]
			p = (p + c) & (size - 1)
		}
		n += int(s.Length)
	}
	if n > 0 {
		mlx5.PutInlineHeader(q.buf[hdr:hdr+4], uint32(n))
	}
	return n
}

// retire is called by the poller for a requester CQE of the WQE at the 16-bit wqe_counter:
// that WQE and every unsignaled one before it are done.
func (q *sendQueue) retire(wqeCounter uint16) uint64 {
	idx := uint32(wqeCounter) & q.mask
	q.done.Store(q.pos[idx] + uint32(q.nbb[idx]))
	q.tail.Store(q.wqeHead[idx])
	return q.wrid[idx]
}
