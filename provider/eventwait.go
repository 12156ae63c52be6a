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
		if testHookBeforeEventRead != nil {
			testHookBeforeEventRead(fd)
		}
		for {
			n, rerr = unix.Read(fd, b)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN // EAGAIN: wait in the poller, then read again
			}
		}
	})
	if err != nil {
		return 0, err
	}
	return n, rerr
}
