package failover

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/fdwait"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// CompChannel is a completion event channel (ibv_comp_channel) for failover CQs: an armed CQ
// raises one event when a completion for the application arrives, on the default CQ (the
// provider's channel, forwarded by a goroutine) or, after a fallback, from the backup CQ
// (raised by the backup device's event goroutine when it buffers one).
//
// Its descriptor is the read end of a pipe carrying struct ib_uverbs_comp_event_desc records
// (the CQ's user handle, 8 bytes), the format the kernel's event files have: a C program (or
// libibverbs' ibv_get_cq_event, through the plugin) reads it as it would read a kernel
// channel, and the events SHIFT raises from the backup NIC reach it the same way.
type CompChannel struct {
	c    *Context
	def  *provider.CompChannel
	rfd  int          // read end: Fd
	wfd  int          // write end: raise
	wait *fdwait.File // the read end reopened in the network poller, for GetEvent; nil: poll(2)
	// reader is held by the GetEvent waiting through wait: a cancelled wait ends every wait
	// on it (fdwait.File.ReadContext), so a concurrent GetEvent polls instead.
	reader sync.Mutex
	stop   context.CancelFunc
	done   sync.WaitGroup
	closed atomic.Bool

	mu       sync.Mutex
	cqs      map[*provider.CQ]*CQ // default CQ → CQ, for the forwarded events
	byHandle map[uint64]*CQ       // user handle → CQ, for GetEvent
}

// CreateCompChannel is ibv_create_comp_channel.
func (c *Context) CreateCompChannel() (verbs.CompChannel, error) {
	d, err := as[*provider.CompChannel](c.def.CreateCompChannel())
	if err != nil {
		return nil, fmt.Errorf("failover: create_comp_channel: %w", err)
	}
	// The read end blocks, as a kernel channel does (libibverbs' ibv_get_cq_event reads it
	// without polling first); the write end never does (raise drops an event the pipe has no
	// room for).
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		d.Close()
		return nil, fmt.Errorf("failover: create_comp_channel: pipe: %w", err)
	}
	if err := unix.SetNonblock(p[1], true); err != nil {
		d.Close()
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, fmt.Errorf("failover: create_comp_channel: pipe: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := &CompChannel{c: c, def: d, rfd: p[0], wfd: p[1], stop: cancel,
		cqs: map[*provider.CQ]*CQ{}, byHandle: map[uint64]*CQ{}}
	// A Go caller of GetEvent waits in the runtime's network poller on a second open file of
	// the read end (a goroutine in poll(2) holds its processor: internal/fdwait); the
	// descriptor Fd returns stays blocking. Without /proc, GetEvent polls.
	ch.wait, _ = fdwait.Reopen(p[0], "completion channel")
	ch.done.Add(1)
	go ch.forward(ctx)
	return ch, nil
}

func (ch *CompChannel) forward(ctx context.Context) {
	defer ch.done.Done()
	for {
		pcq, err := ch.def.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		pcq.AckEvents(1)
		ch.mu.Lock()
		cq := ch.cqs[pcq.(*provider.CQ)]
		ch.mu.Unlock()
		if cq != nil {
			cq.raise()
		}
	}
}

// Fd is the descriptor that becomes readable when an event is pending.
func (ch *CompChannel) Fd() int { return ch.rfd }

// GetEvent is ibv_get_cq_event: it waits until ctx ends for the next event and returns its CQ.
func (ch *CompChannel) GetEvent(ctx context.Context) (verbs.CQ, error) {
	var b [8]byte
	if ch.wait != nil && ch.reader.TryLock() {
		err := ch.readEvent(ctx, &b)
		ch.reader.Unlock()
		if err != nil {
			return nil, err
		}
		return ch.handleCQ(binary.NativeEndian.Uint64(b[:]))
	}
	// Without the poller's file (no /proc), or beside a GetEvent that waits through it: poll,
	// then read the non-blocking reopened file where there is one (another reader may take
	// the event between the two), else the blocking descriptor.
	fd := ch.rfd
	if ch.wait != nil {
		fd = ch.wait.Fd()
	}
	for {
		ms := 100
		if dl, ok := ctx.Deadline(); ok {
			ms = min(ms, int(time.Until(dl)/time.Millisecond)+1)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("failover: get_cq_event: %w: %w", verbs.ErrTimeout, ctx.Err())
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, ms)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return nil, fmt.Errorf("failover: get_cq_event: poll: %w", err)
		}
		if n == 0 || pfd[0].Revents&unix.POLLIN == 0 {
			continue
		}
		// Records are 8 bytes, written whole (below PIPE_BUF): a read gets one or none.
		if n, err := unix.Read(fd, b[:]); n == len(b) {
			break
		} else if err != nil && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return nil, fmt.Errorf("failover: get_cq_event: %w", err)
		}
	}
	return ch.handleCQ(binary.NativeEndian.Uint64(b[:]))
}

// readEvent reads one event record through ch.wait.
func (ch *CompChannel) readEvent(ctx context.Context, b *[8]byte) error {
	if ctx.Err() != nil {
		return fmt.Errorf("failover: get_cq_event: %w: %w", verbs.ErrTimeout, ctx.Err())
	}
	var rerr error
	err := ch.wait.ReadContext(ctx, func() bool {
		// Records are 8 bytes, written whole (below PIPE_BUF): a read gets one or none.
		n, err := unix.Read(ch.wait.Fd(), b[:])
		switch {
		case n == len(b):
			return true
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			return false
		case err == nil:
			err = fmt.Errorf("short read of %d bytes", n)
		}
		rerr = err
		return true
	})
	switch {
	case ctx.Err() != nil && err != nil:
		return fmt.Errorf("failover: get_cq_event: %w: %w", verbs.ErrTimeout, ctx.Err())
	case err != nil:
		return fmt.Errorf("failover: get_cq_event: %w", err)
	case rerr != nil:
		return fmt.Errorf("failover: get_cq_event: %w", rerr)
	}
	return nil
}

// handleCQ is the CQ of an event record's user handle.
func (ch *CompChannel) handleCQ(h uint64) (verbs.CQ, error) {
	ch.mu.Lock()
	cq := ch.byHandle[h]
	ch.mu.Unlock()
	if cq == nil {
		return nil, fmt.Errorf("failover: get_cq_event: unknown CQ handle %#x: %w", h, verbs.ErrNotFound)
	}
	return cq, nil
}

// Close is ibv_destroy_comp_channel: the CQs bound to it must be destroyed first.
func (ch *CompChannel) Close() error {
	if ch.closed.Swap(true) {
		return nil
	}
	ch.stop()
	ch.done.Wait()
	var werr error
	if ch.wait != nil {
		werr = ch.wait.Close()
	}
	return errors.Join(ch.def.Close(), werr, unix.Close(ch.rfd), unix.Close(ch.wfd))
}

func (ch *CompChannel) bind(cq *CQ) {
	ch.mu.Lock()
	ch.cqs[cq.def] = cq
	ch.byHandle[cq.handle] = cq
	ch.mu.Unlock()
}

func (ch *CompChannel) unbind(cq *CQ) {
	ch.mu.Lock()
	delete(ch.cqs, cq.def)
	delete(ch.byHandle, cq.handle)
	ch.mu.Unlock()
}

// eventState is a CQ's arming, for its channel.
type eventState struct {
	ch    *CompChannel
	armed atomic.Bool
}

// Arm is ibv_req_notify_cq: the next completion for the application raises one event.
// Solicited-only arming is passed to the default CQ; completions from the backup CQ raise the
// event whatever their solicited bit (a documented approximation).
func (cq *CQ) Arm(solicitedOnly bool) error {
	if cq.ev.ch == nil {
		return fmt.Errorf("failover: req_notify_cq: %w: CQ has no channel", verbs.ErrInvalidArgument)
	}
	cq.ev.armed.Store(true)
	// Arming reads the consumer index the poller writes: exclude SHIFT's drains as Poll does.
	var err error
	if cq.gate.CompareAndSwap(gateOpen, gateBusy) {
		err = cq.def.Arm(solicitedOnly)
		cq.gate.Store(gateOpen)
	} else {
		cq.mu.Lock()
		err = cq.def.Arm(solicitedOnly)
		cq.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("failover: req_notify_cq: %w", err)
	}
	// Completions already buffered by SHIFT would raise no hardware event.
	cq.mu.Lock()
	pending := len(cq.buf) > cq.head
	cq.mu.Unlock()
	if pending {
		cq.raise()
	}
	return nil
}

// AckEvents is ibv_ack_cq_events (events are acknowledged to the provider when forwarded).
func (cq *CQ) AckEvents(n uint32) {}

// raise delivers one event if the CQ is armed. A full pipe (the application stopped reading
// events) drops it: the CQ is disarmed until the application arms it again anyway.
func (cq *CQ) raise() {
	ch := cq.ev.ch
	if ch == nil || !cq.ev.armed.CompareAndSwap(true, false) {
		return
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], cq.handle)
	_, _ = unix.Write(ch.wfd, b[:])
}
