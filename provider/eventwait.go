package provider

import (
	"context"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/fdwait"
)

// readWhenReady reads one record of len(b) bytes from the non-blocking event descriptor fd,
// waiting for it in the runtime's network poller until ctx ends (internal/fdwait: a wait in
// poll(2) held a processor for up to 10 ms after each event). Errors of the read are
// returned as they are, ctx's end as ctx.Err(). ew, if not nil, keeps fd's registration
// with the poller between calls.
func readWhenReady(ctx context.Context, ew *eventWaiter, fd int, b []byte) (int, error) {
	// An event already there is read at once: registering a duplicate with the poller (a
	// dup, two fcntls, two epoll_ctls and a close) is only for a wait.
	if n, err := readEventNow(fd, b); err != unix.EAGAIN {
		return n, err
	}
	if ew != nil && ew.reader.TryLock() {
		defer ew.reader.Unlock()
		w, err := ew.file(fd)
		if err != nil {
			return 0, err
		}
		return readWith(ctx, w, fd, b)
	}
	w, err := fdwait.Dup(fd, "event")
	if err != nil {
		return 0, err
	}
	defer w.Close()
	return readWith(ctx, w, fd, b)
}

// readWith waits for fd's record through w.
func readWith(ctx context.Context, w *fdwait.File, fd int, b []byte) (int, error) {
	var (
		n    int
		rerr error
	)
	err := w.ReadContext(ctx, func() bool {
		n, rerr = readEventNow(fd, b)
		return rerr != unix.EAGAIN // EAGAIN: wait in the poller, then read again
	})
	if err != nil {
		return 0, err
	}
	return n, rerr
}

// readEventNow is one non-blocking read of fd (retried on EINTR): EAGAIN when nothing is
// there.
func readEventNow(fd int, b []byte) (int, error) {
	if testHookBeforeEventRead != nil {
		testHookBeforeEventRead(fd)
	}
	for {
		n, err := unix.Read(fd, b)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// eventWaiter keeps an event descriptor registered with the network poller between the
// waits of its readers (a registration costs a dup, two fcntls, an epoll_ctl and, at its
// end, another and a close: 15–25 µs a wait in BenchmarkEmulatedWriteEvent on the 2-core
// VM). One reader at a time uses it: a cancelled wait ends every wait on the file
// (fdwait.File.ReadContext), so a second reader meanwhile registers a duplicate of its own,
// as every wait did before.
type eventWaiter struct {
	reader sync.Mutex // held by the reader waiting through w
	mu     sync.Mutex // w, closed
	w      *fdwait.File
	closed bool
}

// file returns the registration of fd, made at the first wait.
func (ew *eventWaiter) file(fd int) (*fdwait.File, error) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.closed {
		return nil, os.ErrClosed
	}
	if ew.w == nil {
		w, err := fdwait.Dup(fd, "event")
		if err != nil {
			return nil, err
		}
		ew.w = w
	}
	return ew.w, nil
}

// close ends a wait in progress (os.ErrClosed) and the registration; later waits fail.
func (ew *eventWaiter) close() error {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	ew.closed = true
	if ew.w == nil {
		return nil
	}
	err := ew.w.Close()
	ew.w = nil
	return err
}
