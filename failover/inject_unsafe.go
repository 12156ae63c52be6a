package failover

import (
	"sync/atomic"
	"unsafe"
)

// words returns the injection file's countdown and QPN words as atomics over the shared
// mapping (8-byte aligned: the mapping is page-aligned).
func (s *injectShared) words() (*atomic.Int64, *atomic.Uint32) {
	return (*atomic.Int64)(unsafe.Pointer(&s.mem[0])), (*atomic.Uint32)(unsafe.Pointer(&s.mem[8]))
}
