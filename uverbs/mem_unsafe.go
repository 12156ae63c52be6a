package uverbs

import (
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sizes and offsets of the ABI structs the marshalling code indexes into raw buffers (the
// structs themselves are checked against the headers by the cabi test).
const (
	IoctlHdrSize = int(unsafe.Sizeof(IoctlHdr{}))
	AttrSize     = int(unsafe.Sizeof(Attr{}))
	CmdHdrSize   = int(unsafe.Sizeof(CmdHdr{}))
	ExCmdHdrSize = int(unsafe.Sizeof(ExCmdHdr{}))

	attrFlagsOff = int(unsafe.Offsetof(Attr{}.Flags))
	attrDataOff  = int(unsafe.Offsetof(Attr{}.Data))
)

// sizeOf is unsafe.Sizeof for the ABI structs, as an int.
func sizeOf[T any]() int {
	var v T
	return int(unsafe.Sizeof(v))
}

// The uverbs ABI passes user memory as u64 addresses inside command buffers. Everything that
// turns Go memory into such an address, or such an address back into Go memory, lives here.

// escapeSink and escapeNever force whatever escape() receives onto the heap: the compiler must
// assume the store may happen. Heap objects never move, so an address taken from them stays
// valid until the syscall (or the emulated kernel) has used it; callers keep the object alive
// with runtime.KeepAlive across the call.
var (
	//lint:ignore U1000 written, never read: the possible store is what makes values escape
	escapeSink  any
	escapeNever bool
)

func escape(x any) {
	if escapeNever {
		escapeSink = x
	}
}

// Addr returns the user address of b's first byte for use inside an ABI buffer, or 0 for an
// empty slice. b is moved to the heap; the caller must keep it reachable until the kernel has
// finished with the address.
func Addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	escape(b)
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// structBytes views *p as its raw bytes (the ABI structs are plain fixed-size data).
func structBytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// fromBytes copies the first sizeof(T) bytes of b into a T; short input is zero-extended, as
// the kernel does when a response is shorter than the struct userspace knows.
func fromBytes[T any](b []byte) T {
	var v T
	copy(structBytes(&v), b)
	return v
}

// CopyFromUser copies len(dst) bytes from user address addr into dst, as the kernel's
// copy_from_user does: a bad address yields EFAULT instead of crashing the process. It is how
// an emulated kernel reads the pointed-to data of ioctl attributes and write commands.
func CopyFromUser(dst []byte, addr uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return userAccess(addr, len(dst), func(src []byte) { copy(dst, src) })
}

// CopyToUser copies src to user address addr, as the kernel's copy_to_user does (EFAULT on a
// bad address).
func CopyToUser(addr uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return userAccess(addr, len(src), func(dst []byte) { copy(dst, src) })
}

// UserBytes returns the n bytes at user address addr as a slice aliasing that memory, for an
// emulated device that keeps accessing registered memory (MRs, rings) after the command.
// Accesses through it are not fault-protected; use CopyFromUser/CopyToUser for one-shot copies.
//
// The address arrives as an integer, like in the kernel, so the race detector's pointer
// checks (checkptr) cannot relate it to the Go object it names; they are off here.
//
//go:nocheckptr
func UserBytes(addr uint64, n int) ([]byte, error) {
	if addr == 0 || n < 0 || addr+uint64(n) < addr {
		return nil, unix.EFAULT
	}
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(addr))), n), nil
}

func userAccess(addr uint64, n int, f func([]byte)) (err error) {
	b, err := UserBytes(addr, n)
	if err != nil {
		return err
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = unix.EFAULT
		}
	}()
	f(b)
	return nil
}
