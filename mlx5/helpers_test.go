package mlx5

import (
	"testing"

	"golang.org/x/sys/unix"
)

// mapped returns n bytes of page-aligned anonymous shared memory, like the buffers a provider
// maps for rings, doorbell records and (in the emulator) UAR pages. Go-allocated byte slices
// are not suitable: a non-escaping make may live on the stack with any alignment.
func mapped(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() {
		if err := unix.Munmap(b); err != nil {
			t.Errorf("munmap: %v", err)
		}
	})
	return b
}
