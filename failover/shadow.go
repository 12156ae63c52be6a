package failover

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/provider"
)

// errNotYet is returned by a shadow verb whose remote attribute is not in the KV store yet:
// the verb stays in the list and the goroutine goes on with the next one (appendix B).
var errNotYet = errors.New("failover: remote attribute not available yet")

// shadowOp is one recorded control verb to replay on the backup device.
type shadowOp struct {
	name string
	run  func() error // nil or errNotYet-wrapping error; any other error is kept and the op dropped
	dead bool         // cancelled (its object was destroyed first)
}

// backupDev is a backup device: its context, its completion channel and the two background
// goroutines (shadow verbs, completion events).
type backupDev struct {
	c *Context
	// dead: the device raised DEVICE_FATAL (bkdead.go): nothing waits for its completions.
	dead atomic.Bool
	// idx is the device's place in the backup chain (Options.Backups order): the backup QP
	// set of index idx of every QP lives on it, and connects to the peer's set idx.
	idx int
	ctx *provider.Context

	lkeys sync.Map // default lkey → this device's lkey
	// rkeys caches the peers' MR entries of index idx (rkcache.go): rkeyKey → *mrRec, filled
	// by the shadow goroutine; mrMu (a leaf lock, never held across I/O) guards mr.
	rkeys sync.Map
	// keyGen counts the changes to lkeys and rkeys (keymemo.go).
	keyGen atomic.Uint64
	mrMu   sync.Mutex
	mr     mrState
	ch     *provider.CompChannel
	gid    [16]byte
	// gidIndex is the backup port's GID index the backup QPs use as their source.
	gidIndex uint8

	mu      sync.Mutex
	ops     []*shadowOp
	errs    []error
	wake    chan struct{}
	idle    *sync.Cond
	running bool

	cqMu   sync.Mutex
	cqs    map[*provider.CQ]*CQ
	ctlCQs map[*provider.CQ]*ctlEndpoint // the control endpoints' CQs (cqMu)

	// The shared control QPs of this device, one per peer context (ctlep.go), and the PD
	// they live in; created by the shadow goroutine, destroyed with the context.
	epMu  sync.Mutex
	eps   map[uint64]*ctlEndpoint // peer context's control id → endpoint
	ctlPD *provider.PD
	// rearm rebuilds what failed on this device once its link is up (rearm.go).
	rearm rearmState

	stop context.CancelFunc
	done sync.WaitGroup
	// Stepped contexts (step.go): the context of the scans, the back-off of a blocked
	// list and when the next scan is due.
	stepCtx     context.Context
	stepBackoff time.Duration
	stepDue     time.Time
	closed      bool // mu: the goroutines were stopped
	released    bool // mu: the device was closed
}

func openBackup(c *Context, idx int, name string) (*backupDev, error) {
	b := &backupDev{c: c, idx: idx, wake: make(chan struct{}, 1), cqs: map[*provider.CQ]*CQ{},
		ctlCQs: map[*provider.CQ]*ctlEndpoint{}, eps: map[uint64]*ctlEndpoint{}}
	b.rearm.init()
	b.idle = sync.NewCond(&b.mu)
	var err error
	if b.ctx, err = provider.OpenWith(name, c.opts.Provider); err != nil {
		return nil, fmt.Errorf("failover: open backup %s: %w", name, err)
	}
	g, err := b.ctx.SourceGID(c.opts.Port, c.opts.GIDIndex)
	if err != nil {
		b.ctx.Close()
		return nil, fmt.Errorf("failover: open backup %s: GID: %w", name, err)
	}
	b.gid, b.gidIndex = g.GID, uint8(g.Index)
	if b.ch, err = as[*provider.CompChannel](b.ctx.CreateCompChannel()); err != nil {
		b.ctx.Close()
		return nil, fmt.Errorf("failover: open backup %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	if c.opts.Stepped {
		b.stepCtx = ctx // Step scans and polls instead of the goroutines (step.go)
		return b, nil
	}
	b.done.Add(2)
	go b.shadowLoop(ctx)
	go b.eventLoop(ctx)
	b.watchPort(ctx) // PORT_ACTIVE: re-arm (rearm.go)
	return b, nil
}

// record appends a control verb for the shadow goroutine.
func (b *backupDev) record(name string, run func() error) *shadowOp {
	op := &shadowOp{name: name, run: run}
	b.mu.Lock()
	b.ops = append(b.ops, op)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return op
}

// cancel drops a recorded verb that has not run yet.
func (b *backupDev) cancel(op *shadowOp) {
	b.mu.Lock()
	op.dead = true
	b.mu.Unlock()
}

// shadowLoop runs the recorded verbs best-effort in list order; a verb waiting for a remote
// attribute is skipped and the list rescanned with a bounded back-off, so two hosts creating
// their QPs in different orders never wait on each other.
func (b *backupDev) shadowLoop(ctx context.Context) {
	defer b.done.Done()
	backoff := 100 * time.Microsecond
	for {
		refresh, blocked, progressed, empty := b.scan(ctx)
		if progressed {
			backoff = 100 * time.Microsecond
		}
		var timer <-chan time.Time
		if !empty {
			if blocked {
				t := time.NewTimer(backoff)
				timer = t.C
				backoff = min(backoff*2, 20*time.Millisecond)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-b.wake:
					t.Stop()
				case <-timer:
				}
			}
			continue
		}
		var tick *time.Timer
		var tc <-chan time.Time
		if refresh > 0 {
			tick = time.NewTimer(refresh)
			tc = tick.C
		}
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		case <-tc:
		}
		if tick != nil {
			tick.Stop()
		}
	}
}

// scan is one pass of the shadow goroutine (or of Step, for a stepped context): the peers'
// MR entries, the re-arm of what failed, then every recorded verb in order. refresh is when
// the MR entries or the re-arm want another look (0: not before a wake); blocked means every
// verb left waits for a remote attribute; empty that none is left.
func (b *backupDev) scan(ctx context.Context) (refresh time.Duration, blocked, progressed, empty bool) {
	// The peers' MR entries first: keys a lookup missed, and listings that are due.
	refresh = b.serviceMRs(ctx)
	if d := b.serviceRearm(); d > 0 && (refresh <= 0 || d < refresh) {
		refresh = d // rebuilding what failed: look again then (rearm.go)
	}
	b.mu.Lock()
	ops := append([]*shadowOp(nil), b.ops...)
	b.running = len(ops) > 0
	b.mu.Unlock()
	var keep []*shadowOp
	for _, op := range ops {
		b.mu.Lock()
		dead := op.dead
		b.mu.Unlock()
		if dead {
			continue
		}
		err := op.run()
		switch {
		case err == nil:
			progressed = true
		case errors.Is(err, errNotYet):
			keep = append(keep, op)
		default:
			progressed = true
			b.mu.Lock()
			b.errs = append(b.errs, fmt.Errorf("failover: shadow %s: %w", op.name, err))
			b.mu.Unlock()
		}
	}
	b.mu.Lock()
	// Verbs recorded while this scan ran follow the kept ones, in order.
	b.ops = append(keep, b.ops[len(ops):]...)
	empty = len(b.ops) == 0
	if empty {
		b.running = false
		b.idle.Broadcast()
	}
	b.mu.Unlock()
	return refresh, len(keep) == len(ops) && len(ops) > 0, progressed, empty
}

// wait blocks until the list is empty, and returns the errors of verbs that failed.
func (b *backupDev) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.idle.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.ops) > 0 || b.running {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("failover: wait for shadow verbs (%d pending): %w", len(b.ops), err)
		}
		b.idle.Wait()
	}
	return errors.Join(b.errs...)
}

// eventLoop waits on the backup comp channel and lets the CQ handle its completions, or the
// control endpoint those of its control QP (the peers' notifications).
func (b *backupDev) eventLoop(ctx context.Context) {
	defer b.done.Done()
	onGrownStack(func() { b.events(ctx) }) // the peer's messages run rounds here: stack.go
}

// events reads the backup device's completion events until ctx ends.
func (b *backupDev) events(ctx context.Context) {
	for {
		pcq, err := b.ch.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(time.Millisecond)
			continue
		}
		pcq.AckEvents(1)
		b.cqMu.Lock()
		cq := b.cqs[pcq.(*provider.CQ)]
		ep := b.ctlCQs[pcq.(*provider.CQ)]
		b.cqMu.Unlock()
		if ep != nil {
			ep.onEvent()
			continue
		}
		if cq == nil {
			continue
		}
		cq.onBackupEvent(b.idx)
	}
}

// stopLoops stops the device's goroutines and waits for them; it reports whether this call
// stopped them (false: the device was closed before).
func (b *backupDev) stopLoops() bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.closed = true
	b.mu.Unlock()
	b.stop()
	b.done.Wait()
	return true
}

// close stops the goroutines and closes the device. Context.Close stops every device's
// goroutines before it closes any: a goroutine of one device may send on another's control
// endpoint (a chained round).
func (b *backupDev) close() error {
	b.stopLoops()
	return b.closeStopped()
}

// closeStopped closes a device whose goroutines stopped (once).
func (b *backupDev) closeStopped() error {
	b.mu.Lock()
	if b.released {
		b.mu.Unlock()
		return nil
	}
	b.released = true
	b.mu.Unlock()
	b.dropBuilds()             // re-arms under way (rearm.go)
	eerr := b.closeEndpoints() // their CQs are bound to the channel
	return errors.Join(eerr, b.ch.Close(), b.ctx.Close())
}
