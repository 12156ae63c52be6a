package provider

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// loadBE32 atomically loads the big-endian word at b[off:off+4] (4-byte aligned). The NIC
// writes the CQE word holding the ownership bit last and atomically; loading it atomically
// orders the reads of the rest of the CQE after it (the Go counterpart of rdma-core's
// udma_from_device_barrier after the owner check).
func loadBE32(b []byte, off int) uint32 {
	_ = b[off+3]
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off])))
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], v)
	return binary.BigEndian.Uint32(w[:])
}
