package provider

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

// CompChannel is a completion event channel (ibv_comp_channel): an fd the kernel writes one
// struct ib_uverbs_comp_event_desc to per completion event of an armed CQ bound to it.
type CompChannel struct {
	ctx      *Context
	fd       int
	borrowed bool // the fd belongs to the caller (ImportCompChannel): Close leaves it open
	wait     eventWaiter
}

// CreateCompChannel is ibv_create_comp_channel. The descriptor is non-blocking: GetEvent
// polls before it reads, and an event can leave the queue between the two when another
// thread destroys its CQ (the kernel's ib_uverbs_release_ucq drops a destroyed CQ's unread
// events); a blocking read would then wait for an event that may never come, past ctx's end.
// A caller that reads Fd itself must expect EAGAIN.
func (c *Context) CreateCompChannel() (verbs.CompChannel, error) {
	fd, err := uverbs.CreateCompChannel(c.f)
	if err != nil {
		return nil, opError("create comp channel", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, opError("create comp channel: set O_NONBLOCK", err)
	}
	return &CompChannel{ctx: c, fd: fd}, nil
}

// ImportCompChannel wraps fd, a completion channel created on this context's command file by
// someone else (libibverbs' ibv_create_comp_channel, for a C provider), so that CQs can be
// bound to it. Close leaves fd open: its creator closes it.
func (c *Context) ImportCompChannel(fd int) verbs.CompChannel {
	return &CompChannel{ctx: c, fd: fd, borrowed: true}
}

// Fd is the channel's descriptor (readable when an event is pending).
func (ch *CompChannel) Fd() int { return ch.fd }

// Close is ibv_destroy_comp_channel.
func (ch *CompChannel) Close() error {
	if ch.fd < 0 {
		return nil
	}
	werr := ch.wait.close() // ends a GetEvent waiting
	if ch.borrowed {
		ch.fd = -1
		return opError("destroy comp channel", werr)
	}
	err := errors.Join(werr, unix.Close(ch.fd))
	ch.fd = -1
	return opError("destroy comp channel", err)
}

// GetEvent is ibv_get_cq_event: it waits until ctx ends for the next completion event and
// returns its CQ. Every event must eventually be acknowledged with CQ.AckEvents.
func (ch *CompChannel) GetEvent(ctx context.Context) (verbs.CQ, error) {
	var b [8]byte // struct ib_uverbs_comp_event_desc
	if err := readEvent(ctx, &ch.wait, ch.fd, b[:], "get cq event"); err != nil {
		return nil, err
	}
	h := binary.NativeEndian.Uint64(b[:])
	ch.ctx.mu.Lock()
	cq := ch.ctx.cqByID[h]
	ch.ctx.mu.Unlock()
	if cq == nil {
		return nil, fmt.Errorf("provider: get cq event: unknown CQ %d: %w", h, verbs.ErrNotFound)
	}
	cq.EventReceived()
	return cq, nil
}

// EventReceived is mlx5_cq_event: a completion event of the CQ was read from its channel, so
// the next arm uses the next sequence number. GetEvent calls it; a caller that reads the
// channel itself (libibverbs' ibv_get_cq_event, through the plugin's cq_event op) must.
func (c *CQ) EventReceived() {
	c.ring.armSN.Add(1)
	c.events.Add(1)
}

// testHookBeforeEventRead, set only by tests, runs before each read of an event descriptor
// (the first, and each after the poller found it readable): where another reader or a
// destroyed CQ can take the event away.
var testHookBeforeEventRead func(fd int)

// readEvent waits for fd to become readable (bounded by ctx) and reads one event record.
func readEvent(ctx context.Context, ew *eventWaiter, fd int, b []byte, op string) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= 0 {
		return fmt.Errorf("provider: %s: %w", op, verbs.ErrTimeout)
	}
	m, err := readWhenReady(ctx, ew, fd, b) // eventwait.go
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("provider: %s: %w", op, verbs.ErrTimeout)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("provider: %s: %w", op, err)
		}
		return opError(op+": read", err)
	}
	if m != len(b) {
		return fmt.Errorf("provider: %s: short event of %d bytes: %w", op, m, verbs.ErrInvalidArgument)
	}
	return nil
}

// GetAsyncEvent is ibv_get_async_event: it waits until ctx ends for the next async event.
func (c *Context) GetAsyncEvent(ctx context.Context) (verbs.AsyncEvent, error) {
	return c.ReadAsyncEvent(ctx, c.asyncFD)
}

// ReadAsyncEvent is GetAsyncEvent reading fd instead of the context's own descriptor: a
// descriptor onto which someone who reads the context's events forwards them unchanged, one
// struct ib_uverbs_async_event_desc per message (failover's). Elements name this context's
// objects, as in GetAsyncEvent.
func (c *Context) ReadAsyncEvent(ctx context.Context, fd int) (verbs.AsyncEvent, error) {
	var b [16]byte // struct ib_uverbs_async_event_desc
	if err := readEvent(ctx, nil, fd, b[:], "get async event"); err != nil {
		return verbs.AsyncEvent{}, err
	}
	return c.DecodeAsyncEvent(b), nil
}

// DecodeAsyncEvent turns a struct ib_uverbs_async_event_desc read from the context's async
// descriptor into an event naming this context's objects (an element naming none leaves them
// unset, as an event of an object destroyed since).
func (c *Context) DecodeAsyncEvent(b [16]byte) verbs.AsyncEvent {
	elem := binary.NativeEndian.Uint64(b[0:])
	ev := verbs.AsyncEvent{Type: verbs.AsyncEventType(binary.NativeEndian.Uint32(b[8:]))}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case ev.Type == verbs.EventCQErr:
		if cq := c.cqByID[elem]; cq != nil {
			ev.CQ = cq
		}
	case ev.Type.PortEvent():
		ev.Port = int(elem)
	case ev.Type == verbs.EventDeviceFatal:
	default:
		if qp := c.qpByID[elem]; qp != nil {
			ev.QP = qp
		}
	}
	return ev
}
