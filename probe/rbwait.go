package probe

import (
	"errors"
	"os"

	"github.com/cilium/ebpf/ringbuf"
)

// The ring buffer's reader waits for records in epoll_wait(2), a system call that keeps the
// waiting goroutine's processor (internal/fdwait): after each link event it held one just
// when the fallback the event started needed it. bpfLoop waits in the runtime's network
// poller instead, on a duplicate of the ring buffer's descriptor (a BPF ring buffer is
// pollable: readable while records wait), and the reader only drains what is there (its
// deadline in the past: it never blocks). Where the duplicate cannot be watched the reader
// waits in epoll_wait as before.

// nextRecord reads the next record into rec, waiting in the network poller (b.wake) when
// none is there. An error ends the loop: the source was closed.
func (b *bpfSource) nextRecord(rec *ringbuf.Record) error {
	if b.wake == nil {
		return b.rd.ReadInto(rec)
	}
	var rerr error
	if err := b.wake.Read(func() bool {
		rerr = b.rd.ReadInto(rec)
		return !errors.Is(rerr, os.ErrDeadlineExceeded) // none yet: wait, then read again
	}); err != nil {
		return err
	}
	return rerr
}
