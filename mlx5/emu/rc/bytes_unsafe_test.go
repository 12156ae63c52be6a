package rc

import "unsafe"

// unsafeBytes views a []uint64 as bytes, giving test regions the 8-byte alignment atomics need.
func unsafeBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}
