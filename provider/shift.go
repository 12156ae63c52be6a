package provider

import (
	"fmt"
	"slices"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Ring operations for SHIFT's failover layer. They work on the same rings as PostSend and
// PostRecv and follow the same rule: one goroutine drives a QP's send side at a time, and
// these calls must not run concurrently with PostSend on that QP. Positions are free-running
// WQEBB counters of the SQ (the low 16 bits are the wqe_counter CQEs carry).

// SendMark is a send flag the provider records with the WQE and reports in SendWQE.Marked
// without otherwise interpreting it (SHIFT marks the WRs it must never retransmit).
const SendMark verbs.SendFlags = 1 << 30

// SendWQE describes one send WQE still in the SQ: posted and not yet retired by a completion
// (of its own or of a later signaled WQE), or held after an error (SetRetainSends).
type SendWQE struct {
	Pos      uint32      // producer position of its first WQEBB
	WQEBBs   int         // blocks it occupies
	WRID     uint64      // the wr_id it was posted with
	Opcode   mlx5.Opcode // PRM opcode
	Signaled bool
	// Rung reports whether the doorbell covering it has been rung (false for WQEs posted
	// with PostSendNoDoorbell and not yet released by RingSendDoorbell).
	Rung bool
	// Completed: a held WQE whose error or flush completion was polled (SetRetainSends).
	Completed bool
	// Internal: posted with PostSendInternal, PostSendNoDoorbellInternal or PostDrainMarker.
	Internal bool
	// Marked: posted with SendMark.
	Marked bool
	// TwoSeq is the number of application SEND, SEND_IMM and WRITE_IMM WQEs posted on the QP
	// before this one (free running, kept across resets; see TwoSidedPosted).
	TwoSeq uint32
}

// OutstandingSends appends to dst the send WQEs from the last retired one to the producer
// index, oldest first, and returns the extended slice. It does not allocate when dst has
// room for one entry per outstanding WQEBB.
func (q *QP) OutstandingSends(dst []SendWQE) []SendWQE {
	sq := q.sq
	if sq.wqeCnt == 0 || q.dead.Load() { // a destroyed QP's ring is unmapped
		return dst
	}
	seen := sq.done()
	if sq.holding.Load() {
		seen = sq.seen.Load()
	}
	prevInt := sq.intRetired.Load()
	// One allocation for a list longer than any before: a fallback's first listing of a
	// full ring grew it append by append, 7.8–9.4 µs p50 for 63 WQEs where a sized one took
	// 4.8–5.7 µs (a temporary trace of BenchmarkFallbackLatency, 2026-11-30).
	dst = slices.Grow(dst, int(sq.cur()-sq.done()))
	for p, end := sq.done(), sq.cur(); p != end; {
		idx := p & sq.mask
		off := int(idx) * mlx5.SendWQEBB
		c, _ := mlx5.DecodeCtrlSeg(sq.buf[off : off+16])
		n := int(sq.nbb[idx])
		dst = append(dst, SendWQE{Pos: p, WQEBBs: n, WRID: sq.wrid[idx], Opcode: c.Opcode,
			Signaled: c.Signaled(), Rung: int32(sq.rung-p) > 0, Completed: int32(seen-p) > 0,
			Internal: sq.intAt[idx] != prevInt, Marked: sq.mark[idx], TwoSeq: sq.twoAt[idx]})
		prevInt = sq.intAt[idx]
		p += uint32(n)
	}
	return dst
}

// SetRetainSends makes an error completion leave its WQE and the WQEs flushed behind it
// outstanding (OutstandingSends reports them Completed) instead of retiring them, so that
// they can be copied to another QP (CopySendWQE); they hold their slots until the QP is
// reset. A QP in ERR refuses posts anyway, so the held slots change nothing the application
// can see. SHIFT sets it on its default QPs. It must not run concurrently with Poll.
func (q *QP) SetRetainSends(on bool) {
	if q.sq != nil {
		q.sq.retain = on
	}
}

// TwoSidedPosted is the number of application WQEs consuming a receive at the responder
// (SEND, SEND_IMM, WRITE_IMM) posted on the QP (free running, kept across resets). It must
// not run concurrently with PostSend.
func (q *QP) TwoSidedPosted() uint32 {
	if q.sq == nil {
		return 0
	}
	return q.sq.two
}

// RecvWQE is one posted receive not yet consumed by a completion.
type RecvWQE struct {
	Index uint32 // free-running receive counter value it was posted at
	WRID  uint64
}

// OutstandingRecvs appends the receive WQEs from the last consumed one to the producer index.
func (q *QP) OutstandingRecvs(dst []RecvWQE) []RecvWQE {
	rq := q.rq
	for i := rq.tail.Load(); i != rq.head; i++ {
		dst = append(dst, RecvWQE{Index: i, WRID: rq.wrid[i&rq.mask]})
	}
	return dst
}

// RecvSGL appends the scatter list of the receive WQE at counter value index, read back from
// the ring.
func (q *QP) RecvSGL(index uint32, dst []verbs.SGE) []verbs.SGE {
	rq := q.rq
	base := int(index&rq.mask) << rq.shift
	for j := 0; j < rq.maxGS; j++ {
		o := base + j*mlx5.DataSegSize
		d, _ := mlx5.DecodeDataSeg(rq.buf[o : o+16])
		if d.IsTerminator() {
			break
		}
		dst = append(dst, verbs.SGE{Addr: d.Addr, Length: d.ByteCount, LKey: d.LKey})
	}
	return dst
}

// SendProducer is the SQ producer position (what the next WQE gets); SendRung is the position
// the doorbell was last rung up to.
func (q *QP) SendProducer() uint32 { return q.sq.cur() }

// SendRung is the position the send doorbell was last rung up to.
func (q *QP) SendRung() uint32 { return q.sq.rung }

// SendResets counts the transitions to RESET that restarted the SQ's positions: a position
// names the same WQE for as long as it stays the same (a caller that keeps what it read of a
// WQE by position checks it).
func (q *QP) SendResets() uint32 {
	if q.sq == nil {
		return 0
	}
	return q.sq.resets.Load()
}

// SendWRID returns the wr_id of the send WQE whose first block is at pos (the per-WQE wr_id
// table, as rdma-core's sq.wrid).
func (q *QP) SendWRID(pos uint32) uint64 {
	if q.sq.wqeCnt == 0 {
		return 0
	}
	return q.sq.wrid[pos&q.sq.mask]
}

// PostSendNoDoorbell writes the WQEs exactly as PostSend does but neither updates the doorbell
// record nor writes the UAR: the NIC cannot see them until RingSendDoorbell (or a later
// PostSend, whose doorbell covers everything before it). It returns the producer position
// after the list.
func (q *QP) PostSendNoDoorbell(wrs []verbs.SendWR) (uint32, error) {
	return q.postSendNoDoorbell(wrs, false)
}

// PostSendNoDoorbellInternal is PostSendNoDoorbell for an internal WR (see PostSendInternal).
func (q *QP) PostSendNoDoorbellInternal(wrs []verbs.SendWR) (uint32, error) {
	return q.postSendNoDoorbell(wrs, true)
}

func (q *QP) postSendNoDoorbell(wrs []verbs.SendWR, internal bool) (uint32, error) {
	if len(wrs) == 0 {
		return q.sq.cur(), nil
	}
	if err := q.checkSend(wrs, internal); err != nil {
		return q.sq.cur(), err
	}
	q.sq.write(wrs, internal)
	return q.sq.cur(), nil
}

// RingSendDoorbell rings the send doorbell up to position upTo, which must be the end of a
// posted WQE between the last rung position and the producer. The 8-byte doorbell carries the
// control segment of the WQE that ends at upTo, as post_send_db would have written it.
func (q *QP) RingSendDoorbell(upTo uint32) error {
	sq := q.sq
	cur := sq.cur()
	if sq.wqeCnt == 0 {
		return fmt.Errorf("provider: ring doorbell: %w: QP %#x has no send queue", verbs.ErrInvalidArgument, q.qpn)
	}
	if int32(upTo-sq.rung) < 0 || int32(cur-upTo) < 0 {
		return fmt.Errorf("provider: ring doorbell: %w: position %d outside rung %d..producer %d",
			verbs.ErrInvalidArgument, upTo, sq.rung, cur)
	}
	if upTo == sq.rung {
		return nil
	}
	start := sq.startOf[(upTo-1)&sq.mask]
	if start+uint32(sq.nbb[start&sq.mask]) != upTo {
		return fmt.Errorf("provider: ring doorbell: %w: position %d is not a WQE boundary", verbs.ErrInvalidArgument, upTo)
	}
	ctrlOff := int(start&sq.mask) * mlx5.SendWQEBB
	c, _ := mlx5.DecodeCtrlSeg(sq.buf[ctrlOff : ctrlOff+16])
	last := mlx5.Posted{Offset: ctrlOff, WQEIndex: c.WQEIndex, DS: c.DS, BBs: sq.nbb[start&sq.mask]}
	// nreq 2: never BlueFlame, always the 8-byte doorbell naming the WQE ending at upTo.
	sq.bf.RingAt(sq.ring, sq.db, upTo, 2, last, false)
	sq.rung = upTo
	return nil
}

// WQERewrite says how CopySendWQE adapts a WQE to its new QP: the control segment always gets
// the destination's QPN and WQE index; keys are mapped by the functions (nil keeps them).
type WQERewrite struct {
	LKey func(uint32) uint32 // local keys of data segments
	RKey func(uint32) uint32 // the remote key of RDMA and atomic WQEs
}

// CopySendWQE copies the send WQE at position pos of src into q's SQ at its producer position
// without ringing the doorbell, rewriting QPN, WQE index and keys, and records the same wr_id.
// It returns the producer position after the copy.
func (q *QP) CopySendWQE(src *QP, pos uint32, rw WQERewrite) (uint32, error) {
	ssq, dsq := src.sq, q.sq
	if ssq.wqeCnt == 0 || dsq.wqeCnt == 0 {
		return dsq.cur(), fmt.Errorf("provider: copy WQE: %w: QP without a send queue", verbs.ErrInvalidArgument)
	}
	sidx := pos & ssq.mask
	if int32(pos-ssq.done()) < 0 || int32(ssq.cur()-pos) <= 0 || ssq.pos[sidx] != pos {
		return dsq.cur(), fmt.Errorf("provider: copy WQE: %w: position %d is not an outstanding WQE of QP %#x",
			verbs.ErrInvalidArgument, pos, src.qpn)
	}
	nbb := uint32(ssq.nbb[sidx])
	if dsq.head-dsq.tail()+1 > dsq.maxPost {
		return dsq.cur(), &verbs.WRError{Op: "copy_wqe", Limit: int(dsq.maxPost), Got: int(dsq.head-dsq.tail()) + 1, Err: verbs.ErrSQFull}
	}
	if nbb > dsq.slotBB {
		// The destination's max_post assumes WQEs of at most its own slot size.
		return dsq.cur(), fmt.Errorf("provider: copy WQE: %w: %d WQEBBs exceed the destination's %d-block WQE slot",
			verbs.ErrInvalidArgument, nbb, dsq.slotBB)
	}
	var wqe [mlx5.MaxDS * mlx5.SegSize]byte
	n, err := ssq.ring.ReadWQE(pos, wqe[:])
	if err != nil {
		return dsq.cur(), fmt.Errorf("provider: copy WQE: %w", err)
	}
	rewriteKeys(wqe[:n], rw)
	dcur := dsq.cur()
	if _, err := dsq.ring.WriteWQE(wqe[:n], q.qpn); err != nil {
		return dcur, fmt.Errorf("provider: copy WQE: %w", err)
	}
	c, _ := mlx5.DecodeCtrlSeg(wqe[:n])
	dsq.record(dcur, nbb, ssq.wrid[sidx], false, twoSidedOp(c.Opcode), ssq.mark[sidx]) // a copy of an application WR
	return dcur + nbb, nil
}

// ReadSendWQE copies the send WQE at position pos (unwrapped, DS*16 bytes) into dst and
// returns its length, for callers that keep or inspect WQEs themselves.
func (q *QP) ReadSendWQE(pos uint32, dst []byte) (int, error) {
	if q.sq.wqeCnt == 0 {
		return 0, fmt.Errorf("provider: read WQE: %w: QP %#x has no send queue", verbs.ErrInvalidArgument, q.qpn)
	}
	n, err := q.sq.ring.ReadWQE(pos, dst)
	if err != nil {
		return 0, fmt.Errorf("provider: read WQE: %w", err)
	}
	return n, nil
}

// rewriteKeys maps the remote key of the raddr segment and the local keys of the data
// segments of an unwrapped WQE (inline data carries no key).
func rewriteKeys(wqe []byte, rw WQERewrite) {
	c, _ := mlx5.DecodeCtrlSeg(wqe)
	raddr, atomic, _ := c.Opcode.Segments()
	o := mlx5.CtrlSegSize
	if raddr {
		r, _ := mlx5.DecodeRaddrSeg(wqe[o:])
		if rw.RKey != nil {
			r.RKey = rw.RKey(r.RKey)
			r.Put(wqe[o:])
		}
		o += mlx5.RaddrSegSize
	}
	if atomic {
		o += mlx5.AtomicSegSize
	}
	if rw.LKey == nil || o >= len(wqe) || mlx5.IsInline(wqe[o:]) {
		return
	}
	for ; o+mlx5.DataSegSize <= len(wqe); o += mlx5.DataSegSize {
		d, _ := mlx5.DecodeDataSeg(wqe[o:])
		d.LKey = rw.LKey(d.LKey)
		d.Put(wqe[o:])
	}
}

// resetIndices is mlx5_init_qp_indices plus the doorbell records: what a QP looks like after
// a transition to RESET, so it can be brought up again and reused.
func (q *QP) resetIndices() {
	if sq := q.sq; sq.wqeCnt > 0 {
		sq.resets.Add(1)
		sq.ring.SetCurPost(0)
		sq.rung, sq.head, sq.fmCache, sq.internal = 0, 0, 0, 0
		sq.intRetired.Store(0)
		sq.setRetired(0, 0)
		sq.holding.Store(false)
		sq.seen.Store(0)
		clear(sq.buf)
	}
	if rq := q.rq; rq.wqeCnt > 0 {
		rq.ring.SetHead(0)
		rq.head, rq.internal = 0, 0
		rq.intRetired.Store(0)
		rq.tail.Store(0)
		clear(rq.buf)
	}
	q.sq.db.SetRecvCounter(0)
	q.sq.db.SetSendCounter(0)
}

// clean removes the CQEs of qpn that software has not polled yet and compacts the rest, as
// __mlx5_cq_clean does when a QP goes to RESET or is destroyed. It must not run concurrently
// with Poll on this CQ.
func (c *cqRing) clean(qpn uint32) {
	ci := c.ci()
	prod := ci
	for {
		if prod-ci == c.ncqe {
			break
		}
		off := int(prod&c.mask) * mlx5.CQE64Size
		w := loadBE32(c.buf[off:off+64], 60)
		pass := uint8(0)
		if prod&c.ncqe != 0 {
			pass = 1
		}
		if uint8(w)>>4 == mlx5.CQEInvalid || uint8(w)&1 != pass {
			break
		}
		prod++
	}
	freed := uint32(0)
	for p := prod; p != ci; {
		p--
		off := int(p&c.mask) * mlx5.CQE64Size
		cqe := c.buf[off : off+64]
		e, _ := mlx5.DecodeCQE64(cqe)
		if e.QPN() == qpn {
			freed++
		} else if freed > 0 {
			doff := int((p+freed)&c.mask) * mlx5.CQE64Size
			dst := c.buf[doff : doff+64]
			owner := dst[63] & mlx5.CQEOwnerMask
			copy(dst[:63], cqe[:63])
			dst[63] = cqe[63]&^mlx5.CQEOwnerMask | owner
		}
	}
	if freed > 0 {
		c.ring.SetConsumerIndex(ci + freed)
		c.ring.UpdateCI(c.db)
	}
}

// PostDrainMarker writes a signaled NOP with wr_id wrid at the producer position and rings
// the doorbell, on a QP in ERR (the marker WR of the kernel's ib_drain_sq). The device
// flushes it after every WQE before it, so once its completion is polled no earlier WQE
// will complete any more: an unsignaled WQE that succeeded produces no completion of its
// own and would otherwise stay outstanding, and polling the marker retires it.
func (q *QP) PostDrainMarker(wrid uint64) error {
	if st := q.State(); st != verbs.QPStateErr {
		return &verbs.WRError{Op: "post_drain_marker", Index: 0, Err: fmt.Errorf("%w: QP %#x in %v, not ERR", verbs.ErrQPState, q.qpn, st)}
	}
	sq := q.sq
	if sq == nil || sq.wqeCnt == 0 {
		return &verbs.WRError{Op: "post_drain_marker", Index: 0, Err: verbs.ErrSQFull}
	}
	if sq.head-sq.tail()+1 > sq.maxPost {
		return &verbs.WRError{Op: "post_drain_marker", Index: 0, Limit: int(sq.maxPost), Got: int(sq.head-sq.tail()) + 1, Err: verbs.ErrSQFull}
	}
	cur := sq.ring.CurPost()
	var b mlx5.FastWQE
	b.Begin(sq.ring)
	p := b.Finish(mlx5.OpcodeNOP, sq.qpn, mlx5.CtrlCQUpdate, 0)
	sq.record(cur, uint32(p.BBs), wrid, true, false, false)
	q.ringSQ(1, p, false)
	return nil
}

// SignaledDue reports whether a signaled WQE the doorbell has published is still waiting for
// its completion, and a count that moves whenever completions are polled (the WRs retired,
// plus the WQEBBs held after an error completion on a retaining SQ). It reads only what the poster publishes atomically (the doorbell record) and
// the ring behind it, so a watchdog may call it while PostSend and Poll run on other
// goroutines; a WQE posted meanwhile may be missed until the next call.
func (q *QP) SignaledDue() (retired uint32, due bool) {
	sq := q.sq
	if sq == nil || sq.wqeCnt == 0 || q.dead.Load() {
		return 0, false
	}
	r := sq.retired.Load()
	retired, done := uint32(r), uint32(r>>32)
	if sq.holding.Load() {
		// Held WQEs (SetRetainSends) whose error or flush completions were polled wait for
		// nothing: they are the layer above's to copy, not the device's to complete. Their
		// completions count as progress.
		seen := sq.seen.Load()
		retired += seen - done
		done = seen
	}
	// The doorbell record holds the low 16 bits of the position after the last rung WQE.
	end := done + uint32(uint16(sq.db.SendCounter())-uint16(done))
	if int32(end-done) > int32(sq.wqeCnt) {
		return retired, false // a reset or wrap under way: look again next time
	}
	for p := done; p != end; {
		off := int(p&sq.mask) * mlx5.SendWQEBB
		c, _ := mlx5.DecodeCtrlSeg(sq.buf[off : off+16])
		if c.Signaled() {
			return retired, true
		}
		if c.DS == 0 {
			return retired, false
		}
		p += uint32(mlx5.WQEBBs(int(c.DS)))
	}
	return retired, false
}
