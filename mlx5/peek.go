package mlx5

import "math/bits"

// FromBE32 converts a big-endian device word loaded natively (a doorbell-record word) to its
// value; it inlines to one byte swap, or nothing on a big-endian machine.
func FromBE32(v uint32) uint32 {
	if swapBE {
		return bits.ReverseBytes32(v)
	}
	return v
}

// OpOwnOf is the op_own byte of a CQE's last 32-bit word (wqe_counter, signature, op_own)
// loaded natively.
func OpOwnOf(w uint32) uint8 { return uint8(w >> opOwnShift) }
