package failover

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
)

// CompChannel is a completion event channel (ibv_comp_channel) for failover CQs: an armed CQ
// raises one event when a completion for the application arrives, on the default CQ (the
// provider's channel, forwarded by a goroutine) or, after a fallback, from the backup CQ
// (raised by the backup device's event goroutine when it buffers one).
type CompChannel struct {
	c      *Context
	def    *provider.CompChannel
	events chan *CQ
	stop   context.CancelFunc
	done   sync.WaitGroup

	mu  sync.Mutex
	cqs map[*provider.CQ]*CQ
}

// CreateCompChannel is ibv_create_comp_channel.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	d, err := c.def.CreateCompChannel()
	if err != nil {
		return nil, fmt.Errorf("failover: create_comp_channel: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := &CompChannel{c: c, def: d, events: make(chan *CQ, 1024), stop: cancel, cqs: map[*provider.CQ]*CQ{}}
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
		cq := ch.cqs[pcq]
		ch.mu.Unlock()
		if cq != nil {
			cq.raise()
		}
	}
}

// GetEvent is ibv_get_cq_event: it waits until ctx ends for the next event and returns its CQ.
func (ch *CompChannel) GetEvent(ctx context.Context) (*CQ, error) {
	select {
	case cq := <-ch.events:
		return cq, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("failover: get_cq_event: %w: %w", provider.ErrTimeout, ctx.Err())
	}
}

// Close is ibv_destroy_comp_channel: the CQs bound to it must be destroyed first.
func (ch *CompChannel) Close() error {
	ch.stop()
	ch.done.Wait()
	return ch.def.Close()
}

// CreateCQWithChannel is ibv_create_cq with a completion channel.
func (c *Context) CreateCQWithChannel(cqe int, ch *CompChannel) (*CQ, error) {
	cq, err := c.createCQ(cqe, ch)
	if err != nil {
		return nil, err
	}
	ch.mu.Lock()
	ch.cqs[cq.def] = cq
	ch.mu.Unlock()
	return cq, nil
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
		return fmt.Errorf("failover: req_notify_cq: %w: CQ has no channel", provider.ErrInvalidArgument)
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

// raise delivers one event if the CQ is armed.
func (cq *CQ) raise() {
	if cq.ev.ch == nil || !cq.ev.armed.CompareAndSwap(true, false) {
		return
	}
	select {
	case cq.ev.ch.events <- cq:
	default:
	}
}
