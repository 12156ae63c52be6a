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

// storeBE32 atomically stores v big-endian at b[off:off+4] (4-byte aligned): doorbell record
// words the NIC reads while software updates them.
func storeBE32(b []byte, off int, v uint32) {
	_ = b[off+3]
	var w [4]byte
	binary.BigEndian.PutUint32(w[:], v)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off])), binary.NativeEndian.Uint32(w[:]))
}

// storeU64 atomically stores v (already in memory byte order) at b[off:off+8] (8-byte
// aligned): a UAR register write reaches the device as one 64-bit MMIO write.
func storeU64(b []byte, off int, v uint64) {
	_ = b[off+7]
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), v)
}
