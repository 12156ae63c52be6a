// Package fdwait waits for a descriptor to become readable in the Go runtime's network
// poller rather than in a system call of the waiting goroutine.
//
// A goroutine blocked in a system call (poll(2), epoll_wait(2), a blocking read) keeps its
// processor until the runtime's monitor takes it back, and the monitor looks only at its own
// period, which grows to 10 ms once the process was idle a while. Event loops that went back
// into such a wait after each event therefore held a processor for up to that long, just
// when the event's consequences needed it: on a 2-core machine SHIFT's link-down fallback
// took 10–20 ms in some downs (failover's BenchmarkNetnsLinkDown, p99 about 21 ms; with
// GOMAXPROCS=4, spare processors for the blocked ones, 2.9–3.6 ms). A goroutine parked in
// the network poller holds no processor.
//
// The poller needs a descriptor of its own: a File is a non-blocking duplicate of the
// caller's (the same open file, so the same readiness; O_NONBLOCK is a property of that open
// file, so the caller's descriptor becomes non-blocking too), closed by Close, which also
// ends a Read in progress. Where the caller's descriptor must stay blocking, Reopen opens a
// pipe's read end again as a file of its own.
package fdwait

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotPollable is returned by Dup for a descriptor the network poller cannot watch.
var ErrNotPollable = errors.New("fdwait: descriptor not pollable")

// File is a descriptor's duplicate in the network poller.
type File struct {
	f      *os.File
	rc     syscall.RawConn
	fd     int // f's descriptor (os.File.Fd would make it blocking)
	closed atomic.Bool
}

// Dup duplicates fd (close-on-exec), makes the open file non-blocking and registers the
// duplicate with the network poller.
func Dup(fd int, name string) (*File, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fdwait: dup %s: %w", name, err)
	}
	if err := unix.SetNonblock(d, true); err != nil {
		unix.Close(d)
		return nil, fmt.Errorf("fdwait: %s: set O_NONBLOCK: %w", name, err)
	}
	return inPoller(d, name)
}

// inPoller registers the non-blocking descriptor d, which it owns from then on, with the
// network poller.
func inPoller(d int, name string) (*File, error) {
	f := os.NewFile(uintptr(d), name)
	if f.SetReadDeadline(time.Time{}) != nil { // the poller did not take it
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrNotPollable, name)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fdwait: %s: %w", name, err)
	}
	return &File{f: f, rc: rc, fd: d}, nil
}

// Reopen opens the pipe or FIFO read end fd again, as a new open file (through
// /proc/self/fd), non-blocking and in the network poller, leaving fd's own flags alone: for a
// descriptor that must stay blocking because someone else reads it too (a completion
// channel handed to libibverbs). Read's try must then read from w.Fd(). It fails with
// ErrNotPollable where /proc is not mounted or fd is not a pipe.
func Reopen(fd int, name string) (*File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fdwait: reopen %s: fstat: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil, fmt.Errorf("%w: %s is not a pipe", ErrNotPollable, name)
	}
	d, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: reopen: %w", ErrNotPollable, name, err)
	}
	return inPoller(d, name)
}

// Fd is the duplicate's own descriptor (non-blocking; valid until Close).
func (w *File) Fd() int { return w.fd }

// Read calls try until it reports done, parking in the poller until the descriptor is
// readable whenever it did not: try reads (non-blocking) from the original descriptor and
// reports false when there was nothing (EAGAIN). It returns an error wrapping
// os.ErrClosed after Close, or os.ErrDeadlineExceeded after SetDeadline's time.
func (w *File) Read(try func() (done bool)) error {
	return w.ended(w.rc.Read(func(uintptr) bool { return try() }))
}

// ReadContext is Read ended by ctx as well: it then returns ctx.Err(). The end moves the
// file's read deadline into the past, which ReadContext clears again before it returns, so
// the File serves later reads; a Read or ReadContext of another goroutine in progress on the
// same File meanwhile ends too (one reader at a time, or a File each).
func (w *File) ReadContext(ctx context.Context, try func() (done bool)) error {
	moved := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = w.f.SetReadDeadline(time.Unix(1, 0))
		close(moved)
	})
	err := w.Read(try)
	if !stop() {
		<-moved // the deadline was (or is being) moved: wait for that, then clear it
		_ = w.f.SetReadDeadline(time.Time{})
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Write is Read for writability.
func (w *File) Write(try func() (done bool)) error {
	return w.ended(w.rc.Write(func(uintptr) bool { return try() }))
}

// ended names a wait that Close ended os.ErrClosed (the raw connection says "use of closed
// file", which is not that error).
func (w *File) ended(err error) error {
	if err != nil && w.closed.Load() && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("fdwait: %w (%v)", os.ErrClosed, err)
	}
	return err
}

// SetDeadline bounds the Reads and Writes in progress and later ones (zero: none).
func (w *File) SetDeadline(t time.Time) error { return w.f.SetDeadline(t) }

// Close ends a Read or Write in progress and closes the duplicate.
func (w *File) Close() error {
	w.closed.Store(true)
	return w.f.Close()
}
