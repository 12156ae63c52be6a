package sim

import (
	"fmt"
	"runtime"
)

// heapMark is the first seed after which runSeeds measures the Go heap: by then every cache
// and pool of the stack has reached its working size.
const heapMark = 500

// heapSlack bounds the growth of the live Go heap (HeapAlloc after a GC) from seed heapMark to
// the last one. A run that is not released costs far more per seed. Measured by keeping one
// object of each run reachable after its Close (a planted leak, 1,000 seeds after the mark):
// a failover QP keeps its whole context with it, about 240 KB a seed (the World, the same),
// so the bound is passed within some 35 seeds; a provider QP alone about 24 KB a seed, passed
// within some 350. The heap's own noise over 1,500 seeds is a few KB.
const heapSlack = 8 << 20

// liveHeap is HeapAlloc after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapGrowth reports an error if the live heap grew by more than heapSlack since base.
func heapGrowth(base uint64, seeds int) error {
	now := liveHeap()
	if now > base+heapSlack {
		return fmt.Errorf("sim: the live Go heap grew from %d to %d bytes over %d seeds (bound %d): a leak across runs", base, now, seeds, heapSlack)
	}
	return nil
}
