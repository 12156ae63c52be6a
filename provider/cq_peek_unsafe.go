package provider

import (
	"sync/atomic"
	"unsafe"

	"github.com/shift-rdma/shift/mlx5"
)

// cqPeek is what CQ.Empty reads: the consumer-index word of the CQ's doorbell record and the
// ring, as raw pointers so that the check inlines into its caller (a layer whose own empty
// poll must cost no more than the provider's).
type cqPeek struct {
	ci         *uint32        // set_ci, big-endian
	base       unsafe.Pointer // the ring (mmapped, never Go's heap)
	mask, ncqe uint32
}

func newCQPeek(buf []byte, ci *uint32, ncqe uint32) cqPeek {
	return cqPeek{ci: ci, base: unsafe.Pointer(unsafe.SliceData(buf)), mask: ncqe - 1, ncqe: ncqe}
}

// Empty reports whether the CQ's next entry, at the consumer index its doorbell record
// publishes, still belongs to the device: two atomic loads and no call. Any goroutine may ask;
// like CompletionWaiting, a CQE polled since the last doorbell-record update still counts
// as waiting. A destroyed CQ is not empty (its Poll reports the error).
func (c *CQ) Empty() bool { return !c.dead.Load() && c.ring.peek.empty() }

func (p *cqPeek) empty() bool {
	ci := mlx5.FromBE32(atomic.LoadUint32(p.ci)) & mlx5.CQDBCIMask
	// The word of wqe_counter, signature and op_own (bytes 60-63 of the 64-byte CQE); the
	// device writes it last.
	opOwn := mlx5.OpOwnOf(atomic.LoadUint32((*uint32)(unsafe.Add(p.base, uintptr(ci&p.mask)*mlx5.CQE64Size+60))))
	return opOwn>>4 == mlx5.CQEInvalid || (opOwn&mlx5.CQEOwnerMask != 0) != (ci&p.ncqe != 0)
}
