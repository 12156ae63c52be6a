// Package asymfence gives a fast path and a rare slow path an asymmetric memory barrier: the
// fast path orders a store before a later load with no barrier instruction of its own, and
// the slow path pays for both sides with Linux's membarrier(2)
// (MEMBARRIER_CMD_PRIVATE_EXPEDITED), which makes every CPU running a thread of this process
// execute a full barrier before it returns.
//
// It is the pattern of liburcu's and Folly's asymmetric barriers. SHIFT's post gates use it:
// an application thread marks itself inside the default QP's post with a plain store and
// then loads the gate; a fallback closes the gate, calls Fence, and then reads the mark. On
// amd64 a locked instruction in the post would wait for the WQE stores ahead of it to leave
// the store buffer, lines the emulated or real NIC keeps reading.
package asymfence

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// membarrier(2) commands, from include/uapi/linux/membarrier.h.
const (
	cmdQuery                    = 0
	cmdPrivateExpedited         = 1 << 3
	cmdRegisterPrivateExpedited = 1 << 4
)

// ErrNotSupported is returned when the kernel (or a seccomp filter) refuses the expedited
// private membarrier; callers then use full barriers on both sides.
var ErrNotSupported = errors.New("asymfence: membarrier PRIVATE_EXPEDITED not supported")

var (
	once   sync.Once
	regErr error
)

// Register registers the process for Fence, once; later calls return the first result.
// Fence may be called only after Register returned nil.
func Register() error {
	once.Do(func() { regErr = register() })
	return regErr
}

func register() error {
	mask, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, cmdQuery, 0, 0)
	if errno != 0 {
		return fmt.Errorf("%w: membarrier QUERY: %w", ErrNotSupported, errno)
	}
	if mask&(cmdPrivateExpedited|cmdRegisterPrivateExpedited) != cmdPrivateExpedited|cmdRegisterPrivateExpedited {
		return fmt.Errorf("%w: commands %#x", ErrNotSupported, mask)
	}
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, cmdRegisterPrivateExpedited, 0, 0); errno != 0 {
		return fmt.Errorf("%w: membarrier REGISTER_PRIVATE_EXPEDITED: %w", ErrNotSupported, errno)
	}
	return nil
}

// Fence returns once every thread of the process has executed a full memory barrier: a
// store a thread made before the barrier is visible to the caller's later loads, and a load
// the thread makes after it sees what the caller stored before Fence. It panics if the
// kernel refuses after a successful Register, which it does not do (the command cannot fail
// once registered).
func Fence() {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, cmdPrivateExpedited, 0, 0); errno != 0 {
		panic(fmt.Sprintf("asymfence: membarrier PRIVATE_EXPEDITED after registration: %v", errno))
	}
}
