package failover

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/fdwait"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Async events (docs/FAILOVER.md "Dead NICs"). The default device's async descriptor is the
// only place a NIC says it died (IBV_EVENT_DEVICE_FATAL), that its port went down (PORT_ERR)
// or that a QP broke without a completion to report it (QP_FATAL), so SHIFT reads it itself:
// a goroutine takes every event from the provider context's descriptor, forwards the raw
// struct ib_uverbs_async_event_desc unchanged to a socket pair whose other end is what
// AsyncFD returns, and then acts on it. The application therefore sees every event, in
// order, with the element the kernel wrote (libibverbs maps it to its struct ibv_qp), on a
// descriptor that behaves as the kernel's: one event per read, pollable, blocking unless made
// non-blocking. Forwarding comes first, so a fallback an event starts delays only the events
// behind it, never the application's copy of that one.

// asyncFwd is the event reader and forwarder of a Context.
type asyncFwd struct {
	c            *Context
	src          int // the provider context's async descriptor (non-blocking; the provider owns it)
	ours, app    int // our end of the pair, and the application's (AsyncFD)
	stopR, stopW int // a pipe that wakes the reader when the context closes
	done         chan struct{}
	// srcWait is src in the runtime's network poller (internal/fdwait), nil where it cannot
	// be: the reader then waits in poll(2), as it always does while events are pending.
	// stopWait ends its wait (close).
	srcWait  *fdwait.File
	waitCtx  context.Context
	stopWait context.CancelFunc

	mu      sync.Mutex // guards pending, closed and every send on ours, so withdraw sees a still socket
	pending [][16]byte // events the full socket could not take yet (the kernel's list is unbounded too)
	closed  bool       // the descriptors are closed (their numbers may name other files now)
}

func newAsyncFwd(c *Context) (*asyncFwd, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("failover: async events: socketpair: %w", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("failover: async events: pipe: %w", err)
	}
	// The application's end is non-blocking as the provider's descriptor is (GetAsyncEvent
	// polls, then reads); the plugin makes it blocking for libibverbs. Ours never blocks.
	_ = unix.SetNonblock(fds[0], true)
	_ = unix.SetNonblock(fds[1], true)
	_ = unix.Shutdown(fds[1], unix.SHUT_RD)
	f := &asyncFwd{c: c, src: c.def.AsyncFD(), app: fds[0], ours: fds[1], stopR: p[0], stopW: p[1], done: make(chan struct{})}
	if c.opts.Stepped {
		close(f.done) // no reader goroutine: Context.Step reads the events (async_step.go)
		return f, nil
	}
	f.waitCtx, f.stopWait = context.WithCancel(context.Background())
	f.srcWait, _ = fdwait.Dup(f.src, "async events")
	go f.run()
	return f, nil
}

// run reads the default device's events until the context closes.
func (f *asyncFwd) run() {
	defer close(f.done)
	srcOpen := true
	for {
		f.mu.Lock()
		pend := len(f.pending) > 0
		f.mu.Unlock()
		if f.srcWait != nil && srcOpen && !pend {
			// Nothing waits for the application's end to drain (which only poll(2) below
			// watches): wait for src in the network poller.
			open, err := readEventsWait(f.waitCtx, f.srcWait, f.src, f.handle)
			if err != nil {
				return // closed
			}
			srcOpen = open // gone: wait for the stop below
			continue
		}
		fds := []unix.PollFd{{Fd: int32(f.stopR), Events: unix.POLLIN}, {Fd: int32(f.src), Events: unix.POLLIN}}
		if !srcOpen {
			fds[1].Fd = -1 // poll ignores it
		}
		f.mu.Lock()
		if len(f.pending) > 0 {
			fds = append(fds, unix.PollFd{Fd: int32(f.ours), Events: unix.POLLOUT})
		}
		f.mu.Unlock()
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[0].Revents != 0 {
			return
		}
		if len(fds) > 2 && fds[2].Revents != 0 {
			f.mu.Lock()
			f.flushLocked()
			f.mu.Unlock()
		}
		if fds[1].Revents == 0 {
			continue
		}
		_, srcOpen = readEvents(f.src, f.handle)
	}
}

// forward hands one event to the application's end, in order behind any still pending.
func (f *asyncFwd) forward(b [16]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = append(f.pending, b)
	f.flushLocked()
}

func (f *asyncFwd) flushLocked() {
	for len(f.pending) > 0 {
		if _, err := unix.SendmsgN(f.ours, f.pending[0][:], nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL); err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				return
			}
			f.pending = nil // the application's end is closed: nobody reads events any more
			return
		}
		f.pending = f.pending[1:]
	}
	f.pending = nil
}

// withdraw removes the unread events of the QP whose user handle is h, as the kernel does
// when a QP is destroyed (ib_uverbs_release_uevent): an event naming a destroyed QP would
// make libibverbs hand the application a freed struct ibv_qp.
func (f *asyncFwd) withdraw(h uint64) {
	if f == nil {
		return // a Context not made by Open has none
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	var queued [][16]byte
	var b [16]byte
	for {
		n, _, _, _, err := unix.Recvmsg(f.app, b[:], nil, unix.MSG_DONTWAIT)
		if err != nil || n == 0 {
			break
		}
		if n == len(b) {
			queued = append(queued, b)
		}
	}
	queued = append(queued, f.pending...)
	f.pending = slices.DeleteFunc(queued, func(ev [16]byte) bool {
		t := verbs.AsyncEventType(binary.NativeEndian.Uint32(ev[8:]))
		return binary.NativeEndian.Uint64(ev[:]) == h && qpEvent(t)
	})
	f.flushLocked()
}

// qpEvent reports whether events of type t name a QP.
func qpEvent(t verbs.AsyncEventType) bool {
	switch t {
	case verbs.EventQPFatal, verbs.EventQPReqErr, verbs.EventQPAccessErr, verbs.EventCommEst,
		verbs.EventSQDrained, verbs.EventPathMig, verbs.EventPathMigErr, verbs.EventQPLastWQEReached:
		return true
	}
	return false
}

// close stops the reader and closes both ends of the pair; the provider's descriptor stays
// with the provider context.
func (f *asyncFwd) close() {
	if f == nil {
		return // a Context not made by Open has none
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.mu.Unlock()
	_, _ = unix.Write(f.stopW, []byte{1})
	if f.stopWait != nil {
		f.stopWait() // ends a wait in the poller
	}
	<-f.done
	if f.srcWait != nil {
		_ = f.srcWait.Close()
	}
	unix.Close(f.stopR)
	unix.Close(f.stopW)
	unix.Close(f.ours)
	unix.Close(f.app)
}

// onAsyncEvent acts on one event of the default device (after it was forwarded).
func (c *Context) onAsyncEvent(ev verbs.AsyncEvent) {
	c.asyncEvents.Add(1)
	switch ev.Type {
	case verbs.EventDeviceFatal:
		// The device will not execute or complete anything again: the fallbacks below
		// must not wait for its flushes, and no probe may try to come back to it.
		c.defDead.Store(true)
		c.eng.do(func() { c.fallBackAll(&c.eventFallbacks) })
	case verbs.EventPortErr:
		// The device's own word that the link went down: a link event as the link
		// watcher's, acted on when link events are on (with them off, a link that fails
		// is found by the RC timeouts, as an application without SHIFT finds it).
		if ev.Port == int(c.opts.Port) && c.portEvents.Load() {
			c.eng.do(func() { c.fallBackAll(&c.eventFallbacks) })
		}
	case verbs.EventQPFatal:
		if q := c.qpOf(ev.QP); q != nil {
			c.eng.do(func() {
				q.mu.Lock()
				defer q.mu.Unlock()
				if !q.destroyed && q.mach.sendState() != SendFailed {
					c.eventFallbacks.Add(1)
					q.fallbackLocked(ctlMsg{}, false)
				}
			})
		}
	case verbs.EventQPAccessErr, verbs.EventQPReqErr:
		// The QP's responder refused a request of the peer (its bad key, address or
		// opcode): the flushes behind it are the application's (flushCause).
		if q := c.qpOf(ev.QP); q != nil {
			q.respRefused.Store(true)
		}
	}
}

// qpOf is the failover QP whose default QP is pq, or nil.
func (c *Context) qpOf(pq verbs.QP) *QP {
	p, ok := pq.(*provider.QP)
	if !ok || p == nil {
		return nil
	}
	c.live.mu.Lock()
	defer c.live.mu.Unlock()
	if q := c.live.m[p.QPN()]; q != nil && q.def == p {
		return q
	}
	return nil
}

// AsyncFD is the descriptor of the default device's async events, forwarded unchanged after
// SHIFT read them (async.go): one struct ib_uverbs_async_event_desc per read, pollable. It is
// non-blocking, as the provider's is; a C provider may make it blocking for libibverbs.
// A stepped context reads and forwards them in Step (async_step.go).
func (c *Context) AsyncFD() int {
	if c.async == nil {
		return c.def.AsyncFD()
	}
	return c.async.app
}

// GetAsyncEvent is ibv_get_async_event on the default device: it waits until ctx ends for the
// next event. QP and CQ events name the provider objects of the default device (events of the
// default QP carry the handle given at creation), as the provider's GetAsyncEvent does.
func (c *Context) GetAsyncEvent(ctx context.Context) (verbs.AsyncEvent, error) {
	return c.def.ReadAsyncEvent(ctx, c.AsyncFD())
}
