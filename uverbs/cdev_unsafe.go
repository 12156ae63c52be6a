package uverbs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctlVerbs issues RDMA_VERBS_IOCTL on fd with buf as the ib_uverbs_ioctl_hdr argument.
func ioctlVerbs(fd int, buf []byte) error {
	if len(buf) == 0 {
		return unix.EINVAL
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(RDMAVerbsIoctl), uintptr(unsafe.Pointer(&buf[0])))
	if e != 0 {
		return e
	}
	return nil
}
