package emu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// eventQueue is a kernel event file (a completion channel or the async event file): the
// application holds a real descriptor that becomes readable when an event is queued and
// yields one event struct per read(2), as ib_uverbs_event_read does. It is one end of an
// AF_UNIX SOCK_SEQPACKET pair, so message boundaries are kept and poll/epoll/O_NONBLOCK
// behave as on the kernel's file; the other end stays with the emulator. Events are
// queued without bound (the kernel's event lists are unbounded too) and written by one
// goroutine, so the NIC's callbacks never block on a slow reader.
type eventQueue struct {
	userFd int       // the application's descriptor; it owns and closes it
	userID [2]uint64 // device and inode of the application's end, to tell it from a reuse of the number
	ours   *os.File  // the emulator's end
	oursFd int

	mu      sync.Mutex
	cond    *sync.Cond
	pending [][]byte
	writing bool // the writer goroutine holds an event it has not written yet
	closed  bool
	done    chan struct{}
}

func newEventQueue(name string) (*eventQueue, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: socketpair: %w", name, err)
	}
	q := &eventQueue{userFd: fds[0], ours: os.NewFile(uintptr(fds[1]), name), oursFd: fds[1], done: make(chan struct{})}
	q.userID, _ = fileID(fds[0])
	// Reading is the application's job; the emulator's end only writes.
	_ = unix.Shutdown(fds[1], unix.SHUT_RD)
	q.cond = sync.NewCond(&q.mu)
	go q.writer()
	return q, nil
}

func (q *eventQueue) writer() {
	defer close(q.done)
	for {
		q.mu.Lock()
		for len(q.pending) == 0 && !q.closed {
			q.cond.Wait()
		}
		if q.closed {
			q.mu.Unlock()
			return
		}
		ev := q.pending[0]
		q.pending = q.pending[1:]
		q.writing = true
		q.mu.Unlock()
		_, err := unix.SendmsgN(q.fd(), ev, nil, nil, unix.MSG_NOSIGNAL)
		q.mu.Lock()
		q.writing = false
		if err != nil {
			// The application closed its end: nobody can read events any more.
			q.pending = nil
		}
		q.cond.Broadcast() // withdraw waits for the event in hand
		q.mu.Unlock()
	}
}

// push queues one event. When nothing is pending it is written at once without blocking,
// so the descriptor is readable by the time the NIC's callback returns, as the kernel's
// event list is; only a full socket defers it to the writer goroutine.
func (q *eventQueue) push(ev []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(q.pending) == 0 && !q.writing {
		if _, err := unix.SendmsgN(q.fd(), ev, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL); err == nil {
			return
		}
	}
	q.pending = append(q.pending, ev)
	q.cond.Signal()
}

// fd is the emulator's end. Sends use MSG_NOSIGNAL: an application that closed its end must
// not get SIGPIPE (a C program hosting the provider would die of it).
func (q *eventQueue) fd() int { return q.oursFd }

// pushComp queues a struct ib_uverbs_comp_event_desc { __aligned_u64 cq_handle; }, where
// cq_handle is the user_handle the application gave at create_cq.
func (q *eventQueue) pushComp(userHandle uint64) {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint64(b, userHandle)
	q.push(b)
}

// pushAsync queues a struct ib_uverbs_async_event_desc { __aligned_u64 element; __u32
// event_type; __u32 reserved; }: element is the object's user_handle, or the port number
// for port events.
func (q *eventQueue) pushAsync(element uint64, eventType uint32) {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint64(b, element)
	binary.NativeEndian.PutUint32(b[8:], eventType)
	q.push(b)
}

// withdraw removes the events match selects that the application has not read yet, from the
// socket and from the pending list, keeping the others in order, and returns how many it
// removed. The kernel does this when an object is destroyed (ib_uverbs_release_ucq,
// ib_uverbs_release_uevent) and counts an object's events when they are read: destroy's
// events_reported is what was read, and libibverbs waits for the application to acknowledge
// exactly that many (ibv_cmd_destroy_cq), so an unread event counted there hangs it.
func (q *eventQueue) withdraw(match func(ev []byte) bool) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0
	}
	var queued [][]byte
	buf := make([]byte, 64)
	// The application may have closed its end, and its number may name another file by now:
	// read only from the socket the queue made.
	id, err := fileID(q.userFd)
	mine := err == nil && id == q.userID
	drain := func() {
		for mine {
			// The application's end: the process is the application, and the socket keeps
			// message boundaries (SOCK_SEQPACKET).
			m, _, _, _, err := unix.Recvmsg(q.userFd, buf, nil, unix.MSG_DONTWAIT)
			if err != nil || m == 0 {
				return
			}
			queued = append(queued, bytes.Clone(buf[:m]))
		}
	}
	// The writer may be blocked sending into a full socket (an application that stopped
	// reading): drain it first so that the send completes, then wait for the writer. Drain
	// again before each wait: while this waited for the lock, the writer may have sent more
	// of the pending events and filled the socket again, and a wait without room waits for
	// ever (a stepped simulation that never reads the async file, at a CQ's destroy).
	drain()
	for q.writing {
		q.cond.Wait()
		drain()
	}
	queued = append(queued, q.pending...)
	q.pending = nil
	var kept [][]byte
	n := 0
	for _, ev := range queued {
		if match(ev) {
			n++
		} else {
			kept = append(kept, ev)
		}
	}
	for i, ev := range kept {
		if _, err := unix.SendmsgN(q.fd(), ev, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL); err != nil {
			q.pending = append(q.pending, kept[i:]...)
			q.cond.Signal()
			break
		}
	}
	return n
}

// fileID is the device and inode of descriptor fd.
func fileID(fd int) ([2]uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return [2]uint64{}, err
	}
	return [2]uint64{st.Dev, st.Ino}, nil
}

// compFor selects the completion events of the CQ whose user_handle is h.
func compFor(h uint64) func([]byte) bool {
	return func(ev []byte) bool { return len(ev) == 8 && binary.NativeEndian.Uint64(ev) == h }
}

// asyncFor selects the async events of the object whose user_handle is h, among the given
// event types (an object's own, not port events, whose element is a port number).
func asyncFor(h uint64, types ...uint32) func([]byte) bool {
	return func(ev []byte) bool {
		return len(ev) == 16 && binary.NativeEndian.Uint64(ev) == h && slices.Contains(types, binary.NativeEndian.Uint32(ev[8:]))
	}
}

// close stops the writer, drops undelivered events and closes the emulator's end; a reader
// then sees end of file. The application's descriptor is left to the application.
func (q *eventQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.pending = nil
	q.cond.Broadcast()
	q.mu.Unlock()
	<-q.done
	q.ours.Close()
}
