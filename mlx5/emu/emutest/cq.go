package emutest

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/uverbs"
)

// CQ is a completion queue with its ring, doorbell record and arm state, as libmlx5 keeps it.
type CQ struct {
	c          *Ctx
	Handle     uint32
	CQN        uint32
	UserHandle uint64
	Ring       *mlx5.CQ
	DB         mlx5.DBRec
	Channel    int
	armSN      uint32
}

// CreateCQ creates a CQ of n entries (a power of two) through the ioctl path, attached to the
// completion channel fd (or -1).
func (c *Ctx) CreateCQ(n int, channel int) *CQ {
	c.T.Helper()
	buf := c.Mem(n * 64)
	dbm := c.Mem(64)
	ring, err := mlx5.NewCQ(buf, n, 64)
	if err != nil {
		c.T.Fatal(err)
	}
	ring.Init()
	db, err := mlx5.NewDBRec(dbm[:8])
	if err != nil {
		c.T.Fatal(err)
	}
	ud := mlx5.CreateCQ{BufAddr: uverbs.Addr(buf), DBAddr: uverbs.Addr(dbm), CQESize: 64}
	in := make([]byte, mlx5.CreateCQSize)
	ud.Put(in)
	out := make([]byte, mlx5.CreateCQRespSize)
	q := &CQ{c: c, UserHandle: c.userHandle(), Ring: ring, DB: db, Channel: channel}
	r, err := uverbs.CreateCQ(c.File, uverbs.DriverIDMLX5, uverbs.CreateCQRequest{CQE: uint32(n - 1), UserHandle: q.UserHandle,
		CompChannel: channel, AsyncFD: c.AsyncFD}, in, out)
	if err != nil {
		c.T.Fatalf("create cq: %v", err)
	}
	dr, err := mlx5.DecodeCreateCQResp(out)
	if err != nil {
		c.T.Fatal(err)
	}
	q.Handle, q.CQN = r.Handle, dr.CQN
	return q
}

// Poll returns the next CQE, updating the consumer index in the doorbell record.
func (q *CQ) Poll() (mlx5.CQE64, bool) {
	var e mlx5.CQE64
	if !q.Ring.Poll(&e) {
		return e, false
	}
	q.Ring.UpdateCI(q.DB)
	return e, true
}

// Wait polls until a CQE arrives; the timeout only guards against a hang.
func (q *CQ) Wait(t testing.TB, timeout time.Duration) mlx5.WC {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if e, ok := q.Poll(); ok {
			return e.Completion()
		}
		if time.Now().After(deadline) {
			t.Fatalf("cq %#x: no completion within %v", q.CQN, timeout)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Empty reports whether no CQE is pending.
func (q *CQ) Empty() bool {
	var e mlx5.CQE64
	return !q.Ring.Peek(&e)
}

// Arm requests a completion event (mlx5_arm_cq), through UAR page 0's CQ doorbell.
func (q *CQ) Arm(solicited bool) {
	uar, err := mlx5.NewUARPage(q.c.UARs[0])
	if err != nil {
		q.c.T.Fatal(err)
	}
	q.Ring.Arm(q.DB, uar, q.CQN, q.armSN&3, solicited)
}

// AckEvent advances the arm sequence number, as ibv_get_cq_event's caller does through
// mlx5_cq_event (cq->arm_sn++).
func (q *CQ) AckEvent() { q.armSN++ }
