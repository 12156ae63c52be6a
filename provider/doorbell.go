package provider

import "github.com/shift-rdma/shift/mlx5"

// ringSQ is post_send_db, carried out by package mlx5's BFReg.RingFast (RingAt's barriers and
// bytes, with plain 8-byte UAR stores as rdma-core's mmio_write64_be): barrier, doorbell
// record, then BlueFlame copy of a single small inline WQE or the 8-byte doorbell. It records
// how far the doorbell now reaches.
func (q *QP) ringSQ(nreq int, last mlx5.Posted, inl bool) {
	sq := q.sq
	cur := sq.ring.CurPost()
	sq.bf.RingFast(sq.ring, sq.db, cur, nreq, last, inl)
	sq.rung = cur
}

// armCQ is mlx5_arm_cq through package mlx5: arm word in the doorbell record, then the CQ
// doorbell in the UAR.
func (c *CQ) armCQ(solicited bool) {
	c.ring.ring.Arm(c.ring.db, c.uar, c.cqn, c.ring.armSN.Load(), solicited)
}
