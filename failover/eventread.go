package failover

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/fdwait"
)

// readEvents reads every struct ib_uverbs_async_event_desc waiting on the non-blocking
// descriptor fd and hands each to fn, for the default device's forwarder and the backup
// devices' readers alike, whether a goroutine woke on poll or a stepped context's Step looks.
// It reports whether it read one, and false in open once the descriptor is gone (an error
// other than EAGAIN, or end of file): nothing more will come. A read that is not a whole
// record is skipped; the kernel writes whole ones only.
func readEvents(fd int, fn func(ev [16]byte)) (got, open bool) {
	var b [16]byte
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return got, true
		case err != nil || n == 0:
			return got, false
		case n != len(b):
			continue
		}
		got = true
		fn(b)
	}
}

// readEventsWait is readEvents waiting in the runtime's network poller (w: fd's duplicate,
// internal/fdwait) until it read at least one event or the descriptor is gone (open false);
// err ends the wait: ctx ended or w was closed.
func readEventsWait(ctx context.Context, w *fdwait.File, fd int, fn func(ev [16]byte)) (open bool, err error) {
	open = true
	err = w.ReadContext(ctx, func() bool {
		var got bool
		got, open = readEvents(fd, fn)
		return got || !open // nothing: wait for the descriptor
	})
	return open, err
}
