package emutest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Mem returns n bytes (rounded up to pages) of page-aligned anonymous memory, unmapped when
// the test ends.
func Mem(t testing.TB, n int) []byte {
	t.Helper()
	size := (n + 4095) &^ 4095
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", size, err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b[:n]
}
