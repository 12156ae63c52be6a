package main

import (
	"sync/atomic"
	"unsafe"
)

// storeInject writes the injection words of package failover's file layout into its
// mapping (page-aligned, so both words are naturally aligned): the QPN at offset 8 first,
// then the countdown at offset 0, so that a poster that sees the countdown also sees the
// QPN it applies to.
func storeInject(mem []byte, qpn uint32, n int64) {
	(*atomic.Uint32)(unsafe.Pointer(&mem[8])).Store(qpn)
	(*atomic.Int64)(unsafe.Pointer(&mem[0])).Store(n)
}

// loadInject reads the words back (tests).
func loadInject(mem []byte) (qpn uint32, n int64) {
	return (*atomic.Uint32)(unsafe.Pointer(&mem[8])).Load(), (*atomic.Int64)(unsafe.Pointer(&mem[0])).Load()
}
