package nic

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5"
)

func TestAAFailing(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 8)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	a.scq.poll()
	a.scq.arm(false)
	waitUntil(t, "never", func() bool { return false })
}
