package mlx5

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// CQ is a completion queue ring over the caller's memory: ncqe entries of 64 or 128 bytes (the
// CQE64 is the last 64 bytes of an entry). Ownership follows the mlx5 rule of cq.c get_sw_cqe:
// the entry for counter n belongs to software when its opcode is not MLX5_CQE_INVALID and its
// owner bit equals bit log2(ncqe) of n, so the expected bit flips on every pass around the ring
// and stale entries from the previous pass are never mistaken for new ones.
//
// The consumer side (provider) uses Poll / UpdateCI / Arm; the producer side (device) uses
// Publish. The last 4 bytes of each CQE64 (wqe_counter, signature, op_own) are written last
// and atomically by Publish and loaded atomically by Poll, which orders the rest of the entry
// for the Go memory model just as the owner bit does for DMA.
type CQ struct {
	buf     []byte
	ncqe    uint32
	cqeSize int
	ci      uint32
}

// NewCQ wraps buf, which must hold ncqe entries of cqeSize (64 or 128) bytes, ncqe a power of
// two no larger than 1<<24, 8-byte aligned.
func NewCQ(buf []byte, ncqe, cqeSize int) (*CQ, error) {
	if (cqeSize != 64 && cqeSize != 128) || ncqe <= 0 || ncqe&(ncqe-1) != 0 || ncqe > 1<<24 ||
		len(buf) != ncqe*cqeSize || !aligned(buf, 8) {
		return nil, newErr("new cq", ErrGeometry, unix.EINVAL, "%d CQEs of %d bytes over %d bytes", ncqe, cqeSize, len(buf))
	}
	return &CQ{buf: buf, ncqe: uint32(ncqe), cqeSize: cqeSize}, nil
}

// Init marks every entry invalid and owned by hardware for the first pass, as libmlx5 does
// when it allocates a CQ buffer (op_own = MLX5_CQE_INVALID << 4).
func (q *CQ) Init() {
	for i := uint32(0); i < q.ncqe; i++ {
		atomic.StoreUint32(q.tail(i), ne.Uint32([]byte{0, 0, 0, CQEInvalid << 4}))
	}
}

// Entries is the number of CQEs.
func (q *CQ) Entries() int { return int(q.ncqe) }

// CQESize is the entry size.
func (q *CQ) CQESize() int { return q.cqeSize }

// ConsumerIndex is the consumer counter (cq.cons_index).
func (q *CQ) ConsumerIndex() uint32 { return q.ci }

// SetConsumerIndex moves the consumer counter.
func (q *CQ) SetConsumerIndex(ci uint32) { q.ci = ci }

// cqe64 returns the CQE64 of entry n (masked).
func (q *CQ) cqe64(n uint32) []byte {
	o := int(n&(q.ncqe-1))*q.cqeSize + q.cqeSize - CQE64Size
	return q.buf[o : o+CQE64Size : o+CQE64Size]
}

// tail is the atomic word holding wqe_counter, signature and op_own of entry n.
func (q *CQ) tail(n uint32) *uint32 { return at32(q.cqe64(n), 60) }

// ownerFor is the owner bit software expects (and hardware writes) for counter n.
func (q *CQ) ownerFor(n uint32) uint8 {
	if n&q.ncqe != 0 {
		return 1
	}
	return 0
}

// ready reports whether entry n holds a CQE for counter n.
func (q *CQ) ready(n uint32) bool {
	w := atomic.LoadUint32(q.tail(n))
	// op_own is the last byte of the word in memory.
	var opOwn uint8
	if nativeLittle {
		opOwn = uint8(w >> 24)
	} else {
		opOwn = uint8(w)
	}
	return opOwn>>4 != CQEInvalid && opOwn&CQEOwnerMask == q.ownerFor(n)
}

// Poll decodes the next CQE into c and advances the consumer counter; it returns false when
// the next entry still belongs to hardware. The doorbell record is not updated: call
// UpdateCI after a batch, as mlx5_poll_cq does.
func (q *CQ) Poll(c *CQE64) bool {
	if !q.ready(q.ci) {
		return false
	}
	// udma_from_device_barrier: read the entry only after the owner bit said it is ours, or
	// the CPU may have loaded parts of it before the NIC finished writing them.
	FromDeviceBarrier()
	c.decode(q.cqe64(q.ci))
	q.ci++
	return true
}

// Peek is Poll without advancing.
func (q *CQ) Peek(c *CQE64) bool {
	if !q.ready(q.ci) {
		return false
	}
	FromDeviceBarrier()
	c.decode(q.cqe64(q.ci))
	return true
}

// UpdateCI writes the consumer index to the doorbell record (update_cons_index), telling the
// NIC which entries it may overwrite.
func (q *CQ) UpdateCI(db DBRec) { db.SetConsumerIndex(q.ci) }

// CIWord is the address of the consumer index, for a second poller of the same ring outside
// Go (see SQ.CurPostWord).
func (q *CQ) CIWord() *uint32 { return &q.ci }

// Arm requests an event for the next completion (or the next solicited one), with arm
// sequence number sn; see ArmCQ.
func (q *CQ) Arm(db DBRec, uar UARPage, cqn, sn uint32, solicited bool) {
	ArmCQ(db, uar, cqn, sn, q.ci, solicited)
}

// Publish writes c as the CQE for producer counter pi with the owner bit of that pass
// (overriding c's), body first and the op_own word last. Checking that the entry is free
// (pi - consumer index < Entries) is the producer's business.
func (q *CQ) Publish(pi uint32, c *CQE64) {
	cc := *c
	cc.OpOwn = cc.OpOwn&^CQEOwnerMask | q.ownerFor(pi)
	var tmp [CQE64Size]byte
	cc.Put(tmp[:])
	dst := q.cqe64(pi)
	copy(dst[:60], tmp[:60])
	atomic.StoreUint32(at32(dst, 60), ne.Uint32(tmp[60:]))
}

// HasRoom reports whether a producer at counter pi may write, given the consumer index the
// doorbell record reports (24 bits).
func (q *CQ) HasRoom(pi, dbCI uint32) bool {
	return (pi-dbCI)&CQDBCIMask < q.ncqe
}
