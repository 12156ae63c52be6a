package emutest

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu"
)

// Pair is one RC connection between NIC 0 of host 0 (side A) and NIC 0 of host 1 (side B),
// each side with its own context, send CQ and receive CQ.
type Pair struct {
	A, B         *Ctx
	QA, QB       *QP
	SCQA, RCQA   *CQ
	SCQB, RCQB   *CQ
	ChanA, ChanB int // completion channels of the receive CQs
	Params       ConnParams
}

// NewPair opens both sides on cluster c (at least two hosts), creates the QPs with size sz
// and connects them with p. The receive CQs are attached to completion channels.
func NewPair(t testing.TB, c *emu.Cluster, sz QPSize, p ConnParams) *Pair {
	t.Helper()
	return NewPairOn(t, c.Hosts[0].Devices[0], c.Hosts[1].Devices[0], sz, p)
}

// NewPairOn is NewPair between port 1 of devices a and b.
func NewPairOn(t testing.TB, a, b *emu.Device, sz QPSize, p ConnParams) *Pair {
	t.Helper()
	pr := &Pair{Params: p}
	pr.A = Open(t, a)
	pr.B = Open(t, b)
	pr.ChanA = pr.A.CompChannel()
	pr.ChanB = pr.B.CompChannel()
	pr.SCQA, pr.RCQA = pr.A.CreateCQ(256, -1), pr.A.CreateCQ(256, pr.ChanA)
	pr.SCQB, pr.RCQB = pr.B.CreateCQ(256, -1), pr.B.CreateCQ(256, pr.ChanB)
	pr.QA = pr.A.CreateQP(pr.SCQA, pr.RCQA, sz)
	pr.QB = pr.B.CreateQP(pr.SCQB, pr.RCQB, sz)
	Connect(t, pr.QA, pr.QB, p)
	return pr
}
