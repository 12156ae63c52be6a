package provider

import (
	"sync"

	"github.com/shift-rdma/shift/mlx5"
)

// CQ is a completion queue. Poll is lock-free; Arm and the event functions are control path.
type CQ struct {
	ctx     *Context
	channel *CompChannel
	handle  uint32
	cqn     uint32
	cqe     int // entries the caller may rely on (ncqe - 1)
	ring    *cqRing
	mem     *Buffer      // CQE ring
	dbMem   *Buffer      // doorbell record
	uar     mlx5.UARPage // UAR page the arm doorbell goes to
	mu      sync.Mutex
	qpsMu   sync.Mutex
	dead    bool
}

// CQN is the CQ number.
func (c *CQ) CQN() uint32 { return c.cqn }

// Size is the number of CQEs the CQ holds for the caller (ibv_cq.cqe).
func (c *CQ) Size() int { return c.cqe }

// attach and detach publish a new QPN map for the lock-free poller.
func (c *CQ) attach(q *QP) {
	c.qpsMu.Lock()
	defer c.qpsMu.Unlock()
	old := c.ring.qps.Load()
	m := make(map[uint32]*QP, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[q.qpn] = q
	c.ring.qps.Store(&m)
}

func (c *CQ) detach(q *QP) {
	c.qpsMu.Lock()
	defer c.qpsMu.Unlock()
	old := c.ring.qps.Load()
	m := make(map[uint32]*QP)
	if old != nil {
		for k, v := range *old {
			if k != q.qpn {
				m[k] = v
			}
		}
	}
	c.ring.qps.Store(&m)
}
