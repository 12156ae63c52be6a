package mlx5

import (
	"encoding/binary"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// UARPage is a mapped UAR system page (write-combining or non-cached device memory on real
// hardware, shared memory watched by the device model in the emulator). Registers are written
// with 8-byte atomic stores: a real NIC must see each 8-byte doorbell as one TLP (rdma-core's
// mmio_write64_be), and the emulated NIC loads them atomically from another goroutine.
type UARPage struct {
	mem  []byte
	wake *UARWaker // the in-process device model's, when one watches this page (uarwake.go)
}

// NewUARPage wraps a mapping of at least one adapter page; it must be 8-byte aligned.
func NewUARPage(mem []byte) (UARPage, error) {
	if len(mem) < AdapterPageSize || len(mem)%AdapterPageSize != 0 || !aligned(mem, 8) {
		return UARPage{}, newErr("uar page", ErrGeometry, unix.EINVAL, "mapping of %d bytes", len(mem))
	}
	return UARPage{mem: mem, wake: lookupUARWaker(mem)}, nil
}

// Len is the size of the mapping.
func (u UARPage) Len() int { return len(u.mem) }

// Bytes is the mapping.
func (u UARPage) Bytes() []byte { return u.mem }

// Store64 writes the 8 bytes v, in that order, at the 8-byte aligned offset off, with one plain
// aligned 8-byte store (mmio_write64_be). Not an atomic store: on amd64 that is XCHG, a locked
// read-modify-write, which a write-combining UAR mapping must never see (see RingFast).
func (u UARPage) Store64(off int, v [8]byte) {
	uarStore(u.mem, off, ne.Uint64(v[:]))
}

// Load64 reads the 8 bytes at off as a device would.
func (u UARPage) Load64(off int) [8]byte {
	var v [8]byte
	ne.PutUint64(v[:], atomic.LoadUint64(at64(u.mem[:off+8], off)))
	return v
}

// CQDoorbellValue composes the 8 bytes mlx5_arm_cq writes to MLX5_CQ_DOORBELL:
// big-endian (sn<<28 | cmd | ci) << 32 | cqn.
func CQDoorbellValue(cqn, armWord uint32) [8]byte {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(armWord)<<32|uint64(cqn&qpnMask))
	return v
}

// ParseCQDoorbell splits a CQ doorbell value into the arm word and CQ number.
func ParseCQDoorbell(v [8]byte) (cqn, armWord uint32) {
	x := binary.BigEndian.Uint64(v[:])
	return uint32(x) & qpnMask, uint32(x >> 32)
}

// ArmCQ requests a completion event for the next (solicited == false) or next solicited or
// error (solicited == true) CQE after consumer index ci, as mlx5_arm_cq does. sn is the arm
// sequence number (incremented by the caller on each completion event, mlx5_cq_event).
func ArmCQ(db DBRec, uar UARPage, cqn, sn, ci uint32, solicited bool) {
	w := ArmWord(sn, solicited, ci)
	// The NIC decides whether an event is due by comparing the arm word in the doorbell
	// record with its own state; the record must hold the new word before the UAR write
	// tells the NIC to look at it.
	db.Store(CQArmDB, w)
	// mmio_wc_start: the record store must not pass the following device write.
	WCStart()
	uar.Store64(CQDoorbellOffset, CQDoorbellValue(cqn, w))
	// mmio_flush_writes: push the doorbell out of the write-combining buffer now rather than
	// when the buffer happens to drain, or the event could be delayed indefinitely.
	FlushWrites()
	uar.poke()
}

// BFReg is one blue-flame register of a UAR page (struct mlx5_bf in libmlx5): the place a QP
// rings its send doorbell, either with the first 8 bytes of the WQE or, for a small single WQE,
// with a BlueFlame copy of the whole WQE that saves the NIC a DMA read.
type BFReg struct {
	uar     UARPage
	base    int
	bufSize int
	offset  int
	index   uint32
	// NeedLock makes Ring serialise on the register, for bfregs shared between QPs
	// (need_uuar_lock in libmlx5); the write-combining flush must happen inside the lock.
	NeedLock bool
	// PreferBF uses BlueFlame for non-inline single WQEs too (MLX5_POST_SEND_PREFER_BF).
	PreferBF bool
	// ShutUpBF never uses BlueFlame (MLX5_SHUT_UP_BF).
	ShutUpBF bool
	lock     uint32 // NeedLock's spin lock (bflock.go)
}

// NewBFReg returns the register b of uar.
func NewBFReg(uar UARPage, b Bfreg) (*BFReg, error) {
	if b.Offset < 0 || b.Offset%8 != 0 || b.Offset+2*max(b.BufSize, 8) > uar.Len() {
		return nil, newErr("bfreg", ErrGeometry, unix.EINVAL, "register at %#x (half %d) outside a %d-byte UAR", b.Offset, b.BufSize, uar.Len())
	}
	return &BFReg{uar: uar, base: b.Offset, bufSize: b.BufSize, index: b.Index}, nil
}

// Index is the gross bfreg index.
func (r *BFReg) Index() uint32 { return r.index }

// Register is the register's memory in its UAR page: the two BlueFlame halves (2*BufSize
// bytes, at least 8 each), for a data path outside this package that rings it itself.
func (r *BFReg) Register() []byte { return r.uar.mem[r.base : r.base+2*max(r.bufSize, 8)] }

// BufSize is the size of one BlueFlame half (0 for bfreg 0, which has no BlueFlame).
func (r *BFReg) BufSize() int { return r.bufSize }

// OffsetWord is the address of the register's half selector (the byte offset of the half
// the next doorbell goes to, relative to Register), for a second poster outside Go that
// rings the register as RingFast does; the two must never ring it at the same time.
func (r *BFReg) OffsetWord() *int { return &r.offset }

// CurrentOffset is the offset in the UAR page the next doorbell will be written to.
func (r *BFReg) CurrentOffset() int { return r.base + r.offset }

// Ring rings the SQ doorbell after nreq WQEs were built, the last one at lastOff spanning ds
// 16-byte units, following rdma-core's post_send_db step by step. inline tells whether that
// WQE carries inline data (BlueFlame is then used by default).
func (r *BFReg) Ring(q *SQ, db DBRec, nreq int, last Posted, inline bool) {
	r.RingAt(q, db, q.curPost, nreq, last, inline)
}

// RingAt is Ring with an explicit send counter for the doorbell record: the position just
// past the last WQE being published. Callers that build WQEs ahead of ringing (withheld
// doorbells, SHIFT's fence) publish up to that position while the ring's producer counter is
// already further on; last must be the WQE that ends at counter.
func (r *BFReg) RingAt(q *SQ, db DBRec, counter uint32, nreq int, last Posted, inline bool) {
	if nreq == 0 {
		return
	}
	// 1. udma_to_device_barrier: the WQE stores must reach memory the NIC reads before the
	//    doorbell record advertises them; otherwise a NIC that fetches WQEs on its own
	//    (after a previous doorbell) could read a half-written WQE.
	ToDeviceBarrier()
	// 2. The doorbell record: the NIC uses the send counter to know how far it may read.
	db.SetSendCounter(counter)
	if r.NeedLock {
		r.lockReg()
	}
	// 3. mmio_wc_start: the record store must be globally visible before the UAR write, or
	//    the NIC could act on the doorbell and read a stale counter.
	WCStart()
	ds := int(last.DS)
	if !r.ShutUpBF && nreq == 1 && r.index != 0 && (inline || r.PreferBF) && ds > 1 && ds <= r.bufSize/SegSize {
		// 4a. BlueFlame: copy the WQE in 64-byte blocks, 8 bytes at a time in order (never
		//     memcpy, whose string instructions do not keep store order), wrapping at the
		//     end of the ring as mlx5_bf_copy does.
		q.copyTo(r.uar, r.base+r.offset, last.Offset, (ds*SegSize+SendWQEBB-1)/SendWQEBB*SendWQEBB)
	} else {
		// 4b. The 8-byte doorbell: the first 8 bytes of the control segment (opmod, WQE
		//     index, opcode, QPN, DS), one atomic store.
		var v [8]byte
		copy(v[:], q.buf[last.Offset:last.Offset+8])
		r.uar.Store64(r.base+r.offset, v)
	}
	// 5. mmio_flush_writes inside the lock: if another CPU's doorbell could be flushed
	//    before ours while ours waits in this CPU's write-combining buffer, the NIC would
	//    see the doorbells out of order.
	FlushWrites()
	// 6. Alternate halves, so the next BlueFlame copy never overwrites a buffer the NIC may
	//    still be reading.
	r.offset ^= r.bufSize
	if r.NeedLock {
		r.unlockReg()
	}
	// 7. Wake an in-process device model that parked (uarwake.go; nothing on hardware).
	r.uar.poke()
}

// SQDoorbell is what the 8-byte send doorbell tells the NIC.
type SQDoorbell struct {
	Opmod    uint8
	WQEIndex uint16
	Opcode   Opcode
	QPN      uint32
	DS       uint8
}

// ParseSQDoorbell decodes the 8 bytes of a send doorbell (the first 8 bytes of the last WQE's
// control segment).
func ParseSQDoorbell(v [8]byte) SQDoorbell {
	w0 := binary.BigEndian.Uint32(v[0:])
	w1 := binary.BigEndian.Uint32(v[4:])
	return SQDoorbell{Opmod: uint8(w0 >> 24), WQEIndex: uint16(w0 >> 8), Opcode: Opcode(w0), QPN: w1 >> 8, DS: uint8(w1)}
}
