package main

/*
#include "kernel.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/cshared"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emuhost"
	"github.com/shift-rdma/shift/uverbs"
)

// The Go side of the interposed calls. Each returns a value >= 0, or -errno, or
// SHIFT_EMU_NOT_OURS for a path or mapping that is not an emulated device's.

var state struct {
	once sync.Once
	host *emuhost.Host
	err  error

	mu    sync.Mutex
	files map[int]*emu.File   // by command descriptor
	maps  map[uintptr]mapping // by address
	// sig ends each open descriptor's part in keeping the program's signal handlers off the
	// Go runtime's stacks (cshared.KeepHandlersOnStack).
	sig map[int]func()
}

type mapping struct {
	f *emu.File
	b []byte
}

func host() (*emuhost.Host, error) {
	state.once.Do(func() {
		o, err := emuhost.OptionsFromEnv(os.Getenv)
		if err == nil {
			state.host, err = emuhost.Load(uverbs.DefaultSysfs(), o)
		}
		state.err = err
		state.files = map[int]*emu.File{}
		state.maps = map[uintptr]mapping{}
		state.sig = map[int]func(){}
	})
	return state.host, state.err
}

// debug: SHIFT_EMU_DEBUG=1 prints every failed emulated call, with its error, on stderr
// (the C library calls have only an errno to say why).
var debug = os.Getenv("SHIFT_EMU_DEBUG") == "1"

// fail reports err (when debugging, or when the device cannot take its address: the
// program's own message would not say why) and returns its errno.
func fail(op string, err error) C.long {
	if debug || errors.Is(err, emuhost.ErrAddressTaken) {
		fmt.Fprintf(os.Stderr, "libmlx5-emu-kernel: %s: %v\n", op, err)
	}
	return errno(err)
}

// errno is the errno of err: the unix.Errno it wraps, else EIO.
func errno(err error) C.long {
	var e unix.Errno
	if errors.As(err, &e) {
		return -C.long(e)
	}
	return -C.long(unix.EIO)
}

func fileOf(fd C.int) *emu.File {
	state.mu.Lock()
	defer state.mu.Unlock()
	return state.files[int(fd)]
}

//export shiftKernelOpen
func shiftKernelOpen(path *C.char, flags C.int) C.long {
	h, err := host()
	if err != nil {
		return fail("open "+C.GoString(path), err)
	}
	d := h.Lookup(filepath.Base(C.GoString(path)))
	if d == nil {
		return C.SHIFT_EMU_NOT_OURS
	}
	release, err := cshared.KeepHandlersOnStack()
	if err != nil {
		return fail("open "+C.GoString(path), err)
	}
	f, err := d.Open()
	if err != nil {
		release()
		return fail("open "+C.GoString(path), err)
	}
	fd := f.Fd()
	if flags&C.int(unix.O_CLOEXEC) == 0 {
		// The descriptor is created close-on-exec; honour an open without O_CLOEXEC.
		unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
	}
	state.mu.Lock()
	state.files[fd] = f
	state.sig[fd] = release
	state.mu.Unlock()
	C.shift_emu_fd_set(C.int(fd), 1)
	return C.long(fd)
}

//export shiftKernelIoctl
func shiftKernelIoctl(fd C.int, req C.ulong, arg unsafe.Pointer) C.long {
	f := fileOf(fd)
	if f == nil {
		return -C.long(unix.EBADF)
	}
	if uint64(req) != uint64(uverbs.RDMAVerbsIoctl) || arg == nil {
		return -C.long(unix.ENOTTY)
	}
	// struct ib_uverbs_ioctl_hdr starts with its total length (u16).
	n := *(*uint16)(arg)
	if int(n) < uverbs.IoctlHdrSize {
		return -C.long(unix.EINVAL)
	}
	if err := f.Ioctl(unsafe.Slice((*byte)(arg), int(n))); err != nil {
		return fail("ioctl", err)
	}
	return 0
}

//export shiftKernelWrite
func shiftKernelWrite(fd C.int, buf unsafe.Pointer, n C.size_t) C.long {
	f := fileOf(fd)
	if f == nil {
		return -C.long(unix.EBADF)
	}
	if buf == nil || n == 0 {
		return -C.long(unix.EINVAL)
	}
	if err := f.Write(unsafe.Slice((*byte)(buf), int(n))); err != nil {
		return fail("write", err)
	}
	return C.long(n)
}

//export shiftKernelMmap
func shiftKernelMmap(fd C.int, off C.long, length C.size_t, out *unsafe.Pointer) C.long {
	f := fileOf(fd)
	if f == nil {
		return -C.long(unix.EBADF)
	}
	b, err := f.Mmap(int64(off), int(length))
	if err != nil {
		return fail("mmap", err)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	state.mu.Lock()
	state.maps[uintptr(p)] = mapping{f: f, b: b}
	state.mu.Unlock()
	*out = p
	return 0
}

//export shiftKernelMunmap
func shiftKernelMunmap(addr unsafe.Pointer, length C.size_t) C.long {
	state.mu.Lock()
	m, ok := state.maps[uintptr(addr)]
	if ok {
		delete(state.maps, uintptr(addr))
	}
	state.mu.Unlock()
	if !ok {
		return C.SHIFT_EMU_NOT_OURS
	}
	if err := m.f.Munmap(m.b); err != nil {
		return fail("munmap", err)
	}
	return 0
}

//export shiftKernelClose
func shiftKernelClose(fd C.int) C.long {
	state.mu.Lock()
	f, release := state.files[int(fd)], state.sig[int(fd)]
	delete(state.files, int(fd))
	delete(state.sig, int(fd))
	for a, m := range state.maps {
		if m.f == f {
			delete(state.maps, a) // the kernel keeps them mapped; the emulated pages go with the file
		}
	}
	state.mu.Unlock()
	if f == nil {
		return -C.long(unix.EBADF)
	}
	release()
	// Unmarked before the descriptor is closed: a descriptor number reused by another
	// thread's open must not be taken for ours.
	C.shift_emu_fd_set(fd, 0)
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	return 0
}
