package emu

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// File is an open uverbs command file of an emulated device (struct ib_uverbs_file with its
// ib_ucontext). It implements uverbs.File: Ioctl and Write decode the bytes the real kernel
// would get; Mmap maps UAR pages at mlx5's offsets; Close destroys every object as the
// kernel does on the last close.
type File struct {
	dev     *Device
	fd      *os.File // the command descriptor Fd returns
	handles *handleTable

	mu         sync.Mutex // one command at a time, as uverbs' per-file locks serialise them
	hasContext bool
	ctx        ucontext
	async      atomic.Pointer[eventQueue] // the default async event file; read without mu
	channels   map[int]*eventQueue        // by the application's descriptor
	mapped     [][]byte                   // live Mmap results
	asyncMore  []*eventQueue              // async event files beyond the first (they get no events)
	closed     bool
}

func newFile(d *Device) (*File, error) {
	// The command descriptor is a real descriptor the process owns (a socket nobody reads),
	// so code that polls or passes it around behaves as with /dev/infiniband/uverbsN.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.name, err)
	}
	unix.Close(fds[1])
	return &File{
		dev:      d,
		fd:       os.NewFile(uintptr(fds[0]), d.name),
		handles:  newHandleTable(),
		channels: make(map[int]*eventQueue),
	}, nil
}

// Fd is the command file descriptor.
func (f *File) Fd() int { return int(f.fd.Fd()) }

// asyncEvent queues an async event. It runs from NIC and transport callbacks, which may fire
// inside a command that holds f.mu (a modify_qp delivering a pending transport error), so it
// takes no lock of the file.
func (f *File) asyncEvent(element uint64, typ uint32) {
	if q := f.async.Load(); q != nil {
		q.pushAsync(element, typ)
	}
}

// Close destroys every object of the file in the kernel's order (QPs, then CQs and MRs,
// then PDs) and closes the event files' emulator ends.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return fmt.Errorf("close: %w", ErrClosed)
	}
	f.closed = true
	var errs []error
	for _, h := range f.handles.all(objQP) {
		_, err := f.destroyQPLocked(h)
		errs = append(errs, err)
	}
	for _, h := range f.handles.all(objMR) {
		errs = append(errs, f.deregMRLocked(h))
	}
	for _, h := range f.handles.all(objCQ) {
		_, _, err := f.destroyCQLocked(h)
		errs = append(errs, err)
	}
	for _, h := range f.handles.all(objPD) {
		errs = append(errs, f.deallocPDLocked(h))
	}
	for _, q := range f.channels {
		q.close()
	}
	for _, q := range f.asyncMore {
		q.close()
	}
	f.asyncMore = nil
	f.channels = nil
	if q := f.async.Swap(nil); q != nil {
		q.close()
	}
	f.releaseUARs()
	f.mu.Unlock()
	f.dev.forget(f)
	errs = append(errs, f.fd.Close())
	return errors.Join(errs...)
}

// errIfClosed answers a command on a closed file as the system does on a closed descriptor
// (EBADF).
func (f *File) errIfClosed() error {
	if f.closed {
		return fmt.Errorf("uverbs file closed: %w", unix.EBADF)
	}
	return nil
}
