package provider

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

// CQ is a completion queue. Poll is lock-free; Arm and the event functions are control path.
type CQ struct {
	ctx     *Context
	channel *CompChannel
	id      uint64 // user handle the kernel echoes in events
	handle  uint32
	cqn     uint32
	cqe     int // entries the caller may rely on (ncqe - 1)
	ring    *cqRing
	mem     *Buffer      // CQE ring
	dbMem   *Buffer      // doorbell record
	uar     mlx5.UARPage // UAR page the arm doorbell goes to
	events  atomic.Uint32
	acked   atomic.Uint32
	dead    atomic.Bool // destroyed: the ring memory is gone
	// detached: the ring belongs to an outside data path (DetachDataPath).
	detached atomic.Bool
	qpsMu    sync.Mutex
}

// CompletionWaiting reports whether the device wrote a CQE that the poller has not taken yet.
// Any goroutine may ask: it looks at the entry of the consumer index the poller last
// published in the doorbell record, so a CQE polled since that update still counts as
// waiting (the answer errs toward "the device made progress"). A destroyed CQ has none.
func (c *CQ) CompletionWaiting() bool { return !c.dead.Load() && !c.ring.peek.empty() }

// CreateCQ is ibv_create_cq: a CQ of at least cqe entries, bound to channel (nil for none),
// set up as mlx5_create_cq does (ring of a power of two of 64-byte CQEs, all invalid and
// hardware-owned; doorbell record zeroed).
func (c *Context) CreateCQ(a verbs.CQInitAttr) (verbs.CQ, error) {
	q, err := c.createCQ(a)
	if err != nil {
		return nil, err
	}
	return q, nil
}

func (c *Context) createCQ(a verbs.CQInitAttr) (*CQ, error) {
	channel, ok := a.Channel.(*CompChannel) // a nil *CompChannel means none, as nil does
	if a.Channel != nil && (!ok || channel != nil && channel.ctx != c) {
		return nil, fmt.Errorf("provider: create cq: %w: completion channel of another context", verbs.ErrInvalidArgument)
	}
	compVector := a.CompVector
	ncqe, err := calcCQEntries(a.CQE)
	if err != nil {
		return nil, opError("create cq", err)
	}
	mem, err := newRingBuffer(ncqe * mlx5.CQE64Size)
	if err != nil {
		return nil, opError("create cq", err)
	}
	dbMem, err := newRingBuffer(mlx5.DBRecSize)
	if err != nil {
		mem.Free()
		return nil, opError("create cq", err)
	}
	fail := func(err error) (*CQ, error) { mem.Free(); dbMem.Free(); return nil, opError("create cq", err) }
	db, err := mlx5.NewDBRec(dbMem.Bytes()[:mlx5.DBRecSize])
	if err != nil {
		return fail(err)
	}
	ring, err := newCQRing(mem.Bytes(), ncqe, db)
	if err != nil {
		return fail(err)
	}
	id := a.Handle
	if id == 0 {
		id = c.newID()
	}
	q := &CQ{ctx: c, channel: channel, id: id, ring: ring, mem: mem, dbMem: dbMem, uar: c.uars[0]}
	drv := mlx5.CreateCQ{BufAddr: mem.Addr(), DBAddr: dbMem.Addr(), CQESize: mlx5.CQE64Size}
	var in [mlx5.CreateCQSize]byte
	var out [mlx5.CreateCQRespSize]byte
	drv.Put(in[:])
	chFD := -1
	if channel != nil {
		chFD = channel.fd
	}
	r, err := c.cmdCreateCQ(uverbs.CreateCQRequest{CQE: uint32(ncqe - 1), UserHandle: q.id,
		CompChannel: chFD, CompVector: compVector, AsyncFD: c.asyncFD}, in[:], out[:])
	if err != nil {
		return fail(err)
	}
	resp, err := mlx5.DecodeCreateCQResp(out[:])
	if err != nil {
		c.cmdDestroyCQ(r.Handle)
		return fail(err)
	}
	q.handle, q.cqn, q.cqe = r.Handle, resp.CQN, int(r.CQE)
	c.mu.Lock()
	c.cqByID[q.id] = q
	c.mu.Unlock()
	return q, nil
}

// CQN is the CQ number.
func (c *CQ) CQN() uint32 { return c.cqn }

// Size is the number of CQEs the CQ holds for the caller (ibv_cq.cqe).
func (c *CQ) Size() int { return c.cqe }

// Arm is ibv_req_notify_cq: the next completion (solicited only: the next solicited or error
// completion) raises one event on the CQ's channel.
func (c *CQ) Arm(solicitedOnly bool) error {
	if c.channel == nil {
		return fmt.Errorf("provider: req notify cq: %w: CQ has no completion channel", verbs.ErrInvalidArgument)
	}
	c.armCQ(solicitedOnly)
	return nil
}

// AckEvents is ibv_ack_cq_events.
func (c *CQ) AckEvents(n uint32) { c.acked.Add(n) }

// Destroy is ibv_destroy_cq; the kernel refuses (EBUSY) while QPs use the CQ. Events got
// from the channel should be acknowledged first, as libibverbs requires.
func (c *CQ) Destroy() error {
	if c.dead.Load() {
		return nil
	}
	if err := c.ctx.cmdDestroyCQ(c.handle); err != nil {
		return opError("destroy cq", err)
	}
	if c.dead.Swap(true) {
		return nil // the context was closed meanwhile and freed the ring
	}
	c.ctx.mu.Lock()
	delete(c.ctx.cqByID, c.id)
	c.ctx.mu.Unlock()
	c.mem.Free()
	c.dbMem.Free()
	return nil
}

// attach and detach publish a new QPN map for the lock-free poller.
func (c *CQ) attach(q *QP) {
	c.qpsMu.Lock()
	defer c.qpsMu.Unlock()
	old := c.ring.qps.Load()
	m := make(map[uint32]*QP, len(*old)+1)
	for k, v := range *old {
		m[k] = v
	}
	m[q.qpn] = q
	c.ring.qps.Store(&m)
}

func (c *CQ) detach(q *QP) {
	c.qpsMu.Lock()
	defer c.qpsMu.Unlock()
	old := c.ring.qps.Load()
	m := make(map[uint32]*QP, len(*old))
	for k, v := range *old {
		if k != q.qpn {
			m[k] = v
		}
	}
	c.ring.qps.Store(&m)
}
