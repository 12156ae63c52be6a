package mlx5

import (
	"runtime"
	"sync/atomic"
)

// The lock of a BlueFlame register shared between QPs (NeedLock) is a spin lock on one word,
// as libmlx5's mlx5_spinlock is a pthread spin lock: what it guards is a handful of stores
// and a fence, and a poster outside Go (a C data path sharing the register) takes the same
// word (LockWord) with the same compare-and-swap, so that a doorbell or BlueFlame copy of one
// never interleaves with another's on the register and their flushes stay in lock order.

// spinsBeforeYield bounds the busy wait before the goroutine yields its processor: a holder
// preempted inside (another goroutine, or a thread outside Go) is waited for without
// burning the whole time slice.
const spinsBeforeYield = 64

func (r *BFReg) lockReg() {
	for i := 0; !atomic.CompareAndSwapUint32(&r.lock, 0, 1); i++ {
		if i == spinsBeforeYield {
			runtime.Gosched()
			i = 0
		}
	}
}

func (r *BFReg) unlockReg() { atomic.StoreUint32(&r.lock, 0) }

// LockWord is the address of the register's lock word (0 free, 1 held), for a poster
// outside Go that rings a register shared between QPs: it takes the lock by a
// compare-and-swap from 0 to 1 with acquire ordering, releases it by a release store of 0,
// and does its register writes, its flush and the alternation of halves (OffsetWord) inside.
func (r *BFReg) LockWord() *uint32 { return &r.lock }
