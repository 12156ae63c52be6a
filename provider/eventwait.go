package provider

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/fdwait"
)

// readWhenReady reads one record of len(b) bytes from the non-blocking event descriptor fd,
// waiting for it in the runtime's network poller until ctx ends (internal/fdwait: a wait in
// poll(2) held a processor for up to 10 ms after each event). Errors of the read are
// returned as they are, ctx's end as ctx.Err().
func readWhenReady(ctx context.Context, fd int, b []byte) (int, error) {
	// An event already there is read at once: registering a duplicate with the poller (a
	// dup, two fcntls, two epoll_ctls and a close) is only for a wait.
	if n, err := readEventNow(fd, b); err != unix.EAGAIN {
		return n, err
	}
	w, err := fdwait.Dup(fd, "event")
	if err != nil {
		return 0, err
	}
	defer w.Close()
	var (
		n    int
		rerr error
	)
	err = w.ReadContext(ctx, func() bool {
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
