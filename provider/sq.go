package provider

import (
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// sendQueue is the software side of an mlx5 SQ (struct mlx5_wq + the per-WQE tables of
// struct mlx5_qp in rdma-core): a ring of 64-byte WQEBBs, the producer counter cur (cur_post,
// counting WQEBBs), the WR counters head/tail, and per-WQEBB-index tables filled at post time
// and read at completion time.
//
// Concurrency: one goroutine posts at a time (the QP's users serialise posts, as libmlx5's
// sq.lock does; SHIFT's layer above guarantees it); completions are consumed by the CQ poller,
// which publishes the retired position through one atomic word (retired).
type sendQueue struct {
	ring    *mlx5.SQ    // the ring and its producer counter (cur_post)
	bf      *mlx5.BFReg // where the doorbell goes
	db      mlx5.DBRec  // the QP's doorbell record
	buf     []byte      // ring.Buf()
	wqeCnt  uint32      // power of two
	mask    uint32
	maxPost uint32
	maxGS   int
	maxInl  int
	slotBB  uint32 // WQEBBs of the largest WQE the QP was sized for
	qpn     uint32

	rung uint32 // position the doorbell record was last set to
	head uint32 // WRs posted (free running)
	// retired holds, published together by one atomic store from the poller, the WR count
	// retired by completions (tail, low half) and the WQEBB position after the last retired
	// WQE (done, high half).
	retired atomic.Uint64

	signalAll bool
	fmCache   uint8

	// reserve WRs of maxPost are kept for internal posts (SHIFT's probe, notification and
	// drain marker on the default QP): application posts are limited to maxPost-reserve
	// outstanding application WRs, internal ones to maxPost in all. internal counts the
	// internal WRs posted (poster-owned); intRetired, stored by the poller before retired,
	// how many of them completion retired.
	reserve    uint32
	internal   uint32
	intRetired atomic.Uint32

	// Per WQEBB index of a WQE's first block.
	wrid    []uint64 // the WR's wr_id
	wqeHead []uint32 // head value after this WR (rdma-core's wqe_head + 1)
	pos     []uint32 // full producer position of the WQE
	nbb     []uint8  // WQEBBs the WQE occupies
	intAt   []uint32 // internal after this WR
	// twoAt is the number of application WQEs that consume a receive at the responder (SEND,
	// SEND_IMM, WRITE_IMM) posted before this one, from two (poster-owned, kept across a
	// reset): the sequence number SHIFT compares with the peer's receive counter. mark is
	// the WR's SendMark flag.
	twoAt []uint32
	two   uint32
	mark  []bool
	// retain (SHIFT's default QPs): an error completion does not retire its WQE or the
	// flushed ones behind it; they stay outstanding, holding their slots, until the QP is
	// reset, so the layer above can copy them to another QP. holding is
	// set from the first error completion on (poller-owned); seen is the position after the
	// last WQE an error or flush completion was polled for.
	retain  bool
	holding atomic.Bool // written by the poller, read by OutstandingSends on other goroutines
	seen    atomic.Uint32
	// raceSync orders the tables for the race detector (race_on.go).
	raceSync atomic.Uint32
	// startOf maps the index of a WQE's last block to its first position, so a doorbell can
	// be rung "up to" any WQE boundary with that WQE's control segment.
	startOf []uint32
	// resets counts the transitions to RESET that restarted the positions (SendResets); at
	// the end, away from the fields the post and the poll write.
	resets atomic.Uint32
}

func newSendQueue(ring *mlx5.SQ, bf *mlx5.BFReg, db mlx5.DBRec, slotBytes int, maxPost uint32, maxGS, maxInl int, qpn uint32, signalAll bool) *sendQueue {
	n := uint32(ring.WQECount())
	ring.MaxInline = maxInl
	return &sendQueue{
		ring: ring, bf: bf, db: db, buf: ring.Buf(), wqeCnt: n, mask: n - 1, maxPost: maxPost, maxGS: maxGS,
		maxInl: maxInl, slotBB: uint32(slotBytes / mlx5.SendWQEBB), qpn: qpn, signalAll: signalAll,
		wrid: make([]uint64, n), wqeHead: make([]uint32, n),
		pos: make([]uint32, n), nbb: make([]uint8, n), startOf: make([]uint32, n), intAt: make([]uint32, n),
		twoAt: make([]uint32, n), mark: make([]bool, n),
	}
}

// cur is the producer position in WQEBBs (cur_post, free running).
func (q *sendQueue) cur() uint32 {
	if q.ring == nil { // QP without a send queue
		return 0
	}
	return q.ring.CurPost()
}

// seg returns the 16-byte segment at byte offset off of the ring (mod its size). Segments
// never straddle the end because the ring is a whole number of 64-byte blocks.
func (q *sendQueue) seg(off int) []byte {
	off &= len(q.buf) - 1
	return q.buf[off : off+16 : off+16]
}

var wrToMlx5 = [...]mlx5.Opcode{
	verbs.WRRDMAWrite:        mlx5.OpcodeRDMAWrite,
	verbs.WRRDMAWriteWithImm: mlx5.OpcodeRDMAWriteImm,
	verbs.WRSend:             mlx5.OpcodeSend,
	verbs.WRSendWithImm:      mlx5.OpcodeSendImm,
	verbs.WRRDMARead:         mlx5.OpcodeRDMARead,
	verbs.WRAtomicCmpAndSwp:  mlx5.OpcodeAtomicCS,
	verbs.WRAtomicFetchAdd:   mlx5.OpcodeAtomicFA,
}

// validate checks a whole WR list against the QP limits before anything is written, so a
// rejected list leaves the ring untouched (libmlx5 posts the prefix before the bad WR; this
// provider posts nothing).
func (q *sendQueue) validate(wrs []verbs.SendWR, internal bool) error {
	outstanding := q.head - q.tail() // retired first, then intRetired (see reserve)
	limit, used := q.maxPost, outstanding
	if !internal {
		limit -= q.reserve
		used -= q.internal - q.intRetired.Load()
	}
	if used+uint32(len(wrs)) > limit || outstanding+uint32(len(wrs)) > q.maxPost {
		return &verbs.WRError{Op: "post_send", Index: int(limit - min(used, limit)),
			Limit: int(limit), Got: int(used) + len(wrs), Err: verbs.ErrSQFull}
	}
	for i := range wrs {
		wr := &wrs[i]
		if int(wr.Opcode) >= len(wrToMlx5) {
			return &verbs.WRError{Op: "post_send", Index: i, Err: verbs.ErrBadOpcode}
		}
		if len(wr.SGL) > q.maxGS {
			return &verbs.WRError{Op: "post_send", Index: i, Limit: q.maxGS, Got: len(wr.SGL), Err: verbs.ErrTooManySGE}
		}
		switch wr.Opcode {
		case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAdd:
			if len(wr.SGL) != 1 || wr.SGL[0].Length != mlx5.AtomicSize {
				return &verbs.WRError{Op: "post_send", Index: i, Err: verbs.ErrBadAtomic}
			}
		}
		if wr.Flags&verbs.SendInline != 0 && isInlineable(wr.Opcode) {
			n := 0
			for _, s := range wr.SGL {
				n += int(s.Length)
			}
			if n > q.maxInl {
				return &verbs.WRError{Op: "post_send", Index: i, Limit: q.maxInl, Got: n, Err: verbs.ErrInlineTooLarge}
			}
		}
	}
	return nil
}

// isInlineable: rdma-core honours IBV_SEND_INLINE for any opcode with SGEs; for READ and
// atomics the SGE is a local destination, so inlining makes no sense and the flag is ignored.
func isInlineable(op verbs.WROpcode) bool {
	switch op {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRSend, verbs.WRSendWithImm:
		return true
	}
	return false
}

// write builds the WQEs of a validated list into the ring with package mlx5's FastWQE (the
// same bytes as its WQEBuilder, without the builder's own limit checks, which validate has
// already made), as _mlx5_post_send lays them out, and returns the last WQE and whether it was
// inline (what post_send_db needs to choose BlueFlame).
func (q *sendQueue) write(wrs []verbs.SendWR, internal bool) (last mlx5.Posted, inl bool) {
	nextFence := q.fmCache
	var ce uint8
	if q.signalAll {
		ce = mlx5.CtrlCQUpdate
	}
	ring, qpn := q.ring, q.qpn
	var b mlx5.FastWQE
	for i := range wrs {
		wr := &wrs[i]
		fm := ctrlFlags(wr, ce, nextFence)
		nextFence = 0
		cur := ring.CurPost()
		var p mlx5.Posted
		p, inl = encodeWR(&b, ring, wr, qpn, fm)
		q.record(cur, uint32(p.BBs), wr.WRID, internal, twoSidedOp(wrToMlx5[wr.Opcode]), wr.Flags&SendMark != 0)
		last = p
	}
	q.fmCache = nextFence
	return last, inl
}

// encodeWR writes wr as one WQE at the ring's current position with control flags fm and
// returns it and whether its data went inline: the bytes _mlx5_post_send lays out.
func encodeWR(b *mlx5.FastWQE, ring *mlx5.SQ, wr *verbs.SendWR, qpn uint32, fm uint8) (mlx5.Posted, bool) {
	b.Begin(ring)
	var imm uint32
	switch wr.Opcode {
	case verbs.WRRDMAWrite, verbs.WRRDMARead:
		b.Raddr(wr.RemoteAddr, wr.RKey)
	case verbs.WRRDMAWriteWithImm:
		b.Raddr(wr.RemoteAddr, wr.RKey)
		imm = wr.Imm
	case verbs.WRSendWithImm:
		imm = wr.Imm
	case verbs.WRAtomicCmpAndSwp: // mlx5.CompareSwap's layout: swap_add = swap, compare
		b.Raddr(wr.RemoteAddr, wr.RKey)
		b.Atomic(wr.Swap, wr.CompareAdd)
	case verbs.WRAtomicFetchAdd: // mlx5.FetchAdd's layout: swap_add = addend, compare 0
		b.Raddr(wr.RemoteAddr, wr.RKey)
		b.Atomic(wr.CompareAdd, 0)
	}
	inl := false
	if wr.Flags&verbs.SendInline != 0 && isInlineable(wr.Opcode) {
		for _, s := range wr.SGL {
			if s.Length > 0 {
				b.Inline(memAt(s.Addr, int(s.Length)))
				inl = true
			}
		}
	} else {
		for k := range wr.SGL {
			s := &wr.SGL[k]
			b.Data(s.Length, s.LKey, s.Addr)
		}
	}
	return b.Finish(wrToMlx5[wr.Opcode], qpn, fm, imm), inl
}

// EncodeSendWR writes the WQE the provider's post_send writes for wr at the ring's current
// position, with no fence carried over from an earlier WR, and returns it and whether its data
// went inline; wr must be valid (the provider's checks passed). The SGEs' memory must stay
// mapped: inline data is copied from their addresses. It is what other data paths (the
// plugin's C post_send) are checked against.
func EncodeSendWR(ring *mlx5.SQ, wr *verbs.SendWR, qpn uint32, sigAll bool) (mlx5.Posted, bool) {
	var ce uint8
	if sigAll {
		ce = mlx5.CtrlCQUpdate
	}
	var b mlx5.FastWQE
	return encodeWR(&b, ring, wr, qpn, ctrlFlags(wr, ce, 0))
}

// ctrlFlags is the control segment's fm_ce_se byte of wr: ce (the QP's signal-all bit), the
// fence wr asks for or, without one, the fence carried from an earlier WR, and the signaled
// and solicited bits.
func ctrlFlags(wr *verbs.SendWR, ce, carry uint8) uint8 {
	fm := ce | carry
	if wr.Flags&verbs.SendFence != 0 {
		fm = ce | mlx5.CtrlFence
	}
	if wr.Flags&verbs.SendSignaled != 0 {
		fm |= mlx5.CtrlCQUpdate
	}
	if wr.Flags&verbs.SendSolicited != 0 {
		fm |= mlx5.CtrlSolicited
	}
	return fm
}

// record fills the per-WQE tables for a WQE of nbb blocks at position cur: two says it
// consumes a receive at the responder, mark that it was posted with SendMark.
func (q *sendQueue) record(cur, nbb uint32, wrid uint64, internal, two, mark bool) {
	idx := cur & q.mask
	q.head++
	if internal {
		q.internal++
	}
	q.intAt[idx] = q.internal
	q.wrid[idx] = wrid
	q.wqeHead[idx] = q.head
	q.pos[idx] = cur
	q.nbb[idx] = uint8(nbb)
	q.startOf[(cur+nbb-1)&q.mask] = cur
	q.twoAt[idx] = q.two
	q.mark[idx] = mark
	if two && !internal {
		q.two++
	}
	raceRelease(&q.raceSync)
}

// twoSidedOp reports whether a WQE of PRM opcode op consumes a receive at the responder.
func twoSidedOp(op mlx5.Opcode) bool {
	return op == mlx5.OpcodeSend || op == mlx5.OpcodeSendImm || op == mlx5.OpcodeRDMAWriteImm
}

// hold is retire for an error completion on a retaining SQ: the WQEs before the first failed
// one completed (an RC QP executes in order) and are retired; the failed WQE and those flushed
// behind it stay outstanding.
func (q *sendQueue) hold(wqeCounter uint16) uint64 {
	raceAcquire(&q.raceSync)
	idx := uint32(wqeCounter) & q.mask
	p := q.pos[idx]
	if !q.holding.Load() {
		q.holding.Store(true)
		if p != q.done() {
			prev := q.startOf[(p-1)&q.mask] & q.mask
			q.intRetired.Store(q.intAt[prev])
			q.setRetired(p, q.wqeHead[prev])
		}
	}
	q.seen.Store(p + uint32(q.nbb[idx]))
	return q.wrid[idx]
}

// retire is called by the poller for a requester CQE of the WQE at the 16-bit wqe_counter:
// that WQE and every unsignaled one before it are done.
func (q *sendQueue) retire(wqeCounter uint16) uint64 {
	raceAcquire(&q.raceSync)
	idx := uint32(wqeCounter) & q.mask
	wrid := q.wrid[idx]              // before setRetired frees the slot to a poster on another thread
	q.intRetired.Store(q.intAt[idx]) // before retired: a poster that sees the new tail sees this
	q.setRetired(q.pos[idx]+uint32(q.nbb[idx]), q.wqeHead[idx])
	return wrid
}

// tail is the number of WRs retired; done the position after the last retired WQE.
func (q *sendQueue) tail() uint32 { return uint32(q.retired.Load()) }

func (q *sendQueue) done() uint32 { return uint32(q.retired.Load() >> 32) }

func (q *sendQueue) setRetired(done, tail uint32) {
	q.retired.Store(uint64(done)<<32 | uint64(tail))
}
