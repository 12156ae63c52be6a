package emutest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Mem returns n bytes (rounded up to pages) of page-aligned anonymous memory, unmapped when
// the test ends. Memory the device may still reach (rings, doorbell records, registered
// buffers) must outlive the objects that use it, as pinned pages do under a real kernel:
// allocate it with Ctx.Mem, which frees it only after the context is closed.
func Mem(t testing.TB, n int) []byte {
	t.Helper()
	b := mmap(t, n)
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b[:n]
}

func mmap(t testing.TB, n int) []byte {
	t.Helper()
	size := (n + 4095) &^ 4095
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", size, err)
	}
	return b
}
