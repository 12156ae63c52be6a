package emu

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// checkMapped is the emulated ib_umem_get/get_user_pages: the range must be mapped in this
// process, or the command fails with EFAULT as pinning would. mincore(2) reports ENOMEM for
// any unmapped page without touching the memory.
func checkMapped(addr, length uint64) error {
	if length == 0 {
		return nil
	}
	if addr == 0 || addr+length < addr {
		return fmt.Errorf("bad user range %#x+%d: %w", addr, length, unix.EFAULT)
	}
	start := addr &^ (pageSize - 1)
	end := (addr + length + pageSize - 1) &^ (pageSize - 1)
	n := (end - start) / pageSize
	vec := make([]byte, n)
	// The address is passed as a number: mincore only inspects the page tables.
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(start), uintptr(end-start), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return fmt.Errorf("user range %#x+%d not mapped: %w", addr, length, unix.EFAULT)
	}
	return nil
}

// addrOf is the address of b's first byte as the kernel ABI carries user pointers (the
// emulated kernel and the application share the address space). The caller keeps b alive
// (runtime.KeepAlive) until the address has been used.
func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
