package rc

import (
	"sync/atomic"
	"unsafe"
)

// unsafeBytes views a []uint64 as bytes, giving test regions the 8-byte alignment atomics need.
func unsafeBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// loadWord reads the 8-byte word at off of a region with an atomic load. A test reading what
// a responder on the far side of a UDP link wrote is ordered after it by the packets (the
// responder executes before it answers, the test reads after the answer's completion),
// an order the race detector cannot see through the kernel; the responder's atomic add and
// this load are what it does see.
func loadWord(b []byte, off int) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off])))
}
