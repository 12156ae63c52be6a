package nic

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The NIC reaches host memory by address, as a DMA engine does: the rings, doorbell records,
// CQ buffers and registered regions all live in this process (the emulated kernel hands their
// user addresses to the device), so an address is turned into a slice over that memory. The
// owner of the memory (the provider) keeps it mapped while the device may touch it, exactly
// as it must keep memory pinned and registered for a real NIC.

// hostBytes returns the n bytes of host memory at addr. n == 0 yields an empty slice.
func hostBytes(addr uint64, n int) []byte {
	if n <= 0 || addr == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(addr))), n)
}

// addrOf returns the address of the first byte of b (0 for an empty slice).
func addrOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// swapReg atomically takes the 8-byte register at b[off:off+8] (8-byte aligned) and leaves
// zero in its place, returning the bytes software wrote in memory order. A real doorbell
// register is write-only and every MMIO write reaches the device as one event; taking the
// value and clearing it is how a polling device consumes one such event.
func swapReg(b []byte, off int) (v [8]byte, ok bool) {
	x := atomic.SwapUint64((*uint64)(unsafe.Pointer(&b[off])), 0)
	if x == 0 {
		return v, false
	}
	binary.NativeEndian.PutUint64(v[:], x)
	return v, true
}

// peekReg reports whether the register at b[off:off+8] holds an unconsumed write.
func peekReg(b []byte, off int) bool {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off]))) != 0
}

// checkMapped reports whether every page of [addr, addr+n) is mapped in this process, as the
// kernel's ib_umem_get would find when it pins user memory (EFAULT otherwise). mincore fails
// with ENOMEM on a range containing unmapped pages.
func checkMapped(addr uint64, n uint64) bool {
	if n == 0 {
		return true
	}
	const page = 4096
	start := addr &^ (page - 1)
	end := (addr + n + page - 1) &^ (page - 1)
	if end < start {
		return false
	}
	vec := make([]byte, (end-start)/page)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(start), uintptr(end-start), uintptr(unsafe.Pointer(&vec[0])))
	return e == 0
}

// loadBE32 atomically loads the big-endian 32-bit word at b[off:off+4] (4-byte aligned): a
// doorbell record word software stores with one aligned store.
func loadBE32(b []byte, off int) uint32 {
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off]))))
	return binary.BigEndian.Uint32(w[:])
}

// storeBE32 atomically stores v big-endian at b[off:off+4] (4-byte aligned).
func storeBE32(b []byte, off int, v uint32) {
	var w [4]byte
	binary.BigEndian.PutUint32(w[:], v)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off])), binary.NativeEndian.Uint32(w[:]))
}

// storeWord atomically stores the 4 bytes w, in memory order, at b[off:off+4] (4-byte
// aligned): the last word of a CQE, whose op_own byte hands the entry to software.
func storeWord(b []byte, off int, w [4]byte) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off])), binary.NativeEndian.Uint32(w[:]))
}
