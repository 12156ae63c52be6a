package rc

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// atomic64 executes a CompareSwap or FetchAdd on the 8 bytes of b, in host byte order (the
// ConnectX "host endianness" atomic mode the mlx5 kernel driver selects), and returns the
// original value. When b is 8-byte aligned in memory the operation is a CPU atomic, so it is
// atomic with respect to other QPs and to the local CPU, as a NIC's atomics are with respect to
// each other; otherwise it falls back to a plain read-modify-write.
func atomic64(b []byte, op Op, compare, swapAdd uint64) uint64 {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%8 == 0 {
		w := (*uint64)(p)
		if op == OpFetchAdd {
			return atomic.AddUint64(w, swapAdd) - swapAdd
		}
		for {
			old := atomic.LoadUint64(w)
			if old != compare {
				return old
			}
			if atomic.CompareAndSwapUint64(w, old, swapAdd) {
				return old
			}
		}
	}
	old := binary.NativeEndian.Uint64(b)
	switch {
	case op == OpFetchAdd:
		binary.NativeEndian.PutUint64(b, old+swapAdd)
	case old == compare:
		binary.NativeEndian.PutUint64(b, swapAdd)
	}
	return old
}
