package uverbs

// File is an open uverbs command file. The real kernel sits behind /dev/infiniband/uverbsN; an
// emulated kernel driver implements the same methods over the same bytes, so every layer above
// is exercised identically on both.
//
// Buffers passed to Ioctl and Write may contain user pointers (u64 addresses of other buffers
// in this process), exactly as the kernel ABI defines; implementations dereference them as the
// kernel's copy_from_user/copy_to_user would. Callers keep those buffers alive across the call.
type File interface {
	// Ioctl issues RDMA_VERBS_IOCTL. buf holds a struct ib_uverbs_ioctl_hdr followed by its
	// struct ib_uverbs_attr array, as the kernel reads it; the kernel writes attribute lengths
	// and flags back into buf. The returned error is a unix.Errno.
	Ioctl(buf []byte) error
	// Write issues one legacy write() command: struct ib_uverbs_cmd_hdr (plus struct
	// ib_uverbs_ex_cmd_hdr for extended commands) followed by the command struct. The
	// response is written through the response pointer inside the command. The returned
	// error is a unix.Errno.
	Write(cmd []byte) error
	// Mmap maps length bytes of device memory (UAR pages, driver pages) at the driver-defined
	// offset, shared, read-write.
	Mmap(offset int64, length int) ([]byte, error)
	// Munmap releases a mapping returned by Mmap.
	Munmap(b []byte) error
	// Fd is the command file descriptor (the one completion channels created by the kernel
	// are bound to). Emulated files return a real descriptor as well.
	Fd() int
	// Close releases the file; every object created through it is destroyed, as the kernel
	// does on the last close.
	Close() error
}
