package mlx5

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Words of NIC-visible memory that another agent reads or writes concurrently (doorbell
// records, UAR registers, the last word of a CQE) are accessed only through sync/atomic on
// pointers into the caller's mapping, so the Go memory model orders them against the plain
// stores of WQEs and CQE bodies. These helpers are the only place this package turns a byte
// slice into such a pointer.

// word32 returns a pointer to the 4-byte aligned word at b[off:off+4].
func word32(op string, b []byte, off int) (*uint32, error) {
	if off < 0 || off+4 > len(b) {
		return nil, shortErr(op, len(b), off+4)
	}
	p := unsafe.Pointer(&b[off])
	if uintptr(p)%4 != 0 {
		return nil, newErr(op, ErrGeometry, unix.EINVAL, "word at offset %d not 4-byte aligned", off)
	}
	return (*uint32)(p), nil
}

// at32 and at64 are the unchecked hot-path forms; callers validated alignment and bounds when
// the ring or register was constructed.
func at32(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
func at64(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

// aligned reports whether b starts at an address that is a multiple of n.
func aligned(b []byte, n uintptr) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%n == 0
}
