package provider_test

import (
	"fmt"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Two emulated hosts, one RC connection, one RDMA WRITE.
func Example() {
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, Register: true, Prefix: "example_"})
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	type end struct {
		ctx *provider.Context
		pd  *provider.PD
		cq  *provider.CQ
		qp  *provider.QP
		buf *provider.Buffer
		mr  *provider.MR
		ep  verbs.Endpoint
	}
	open := func(dev string, psn uint32) *end {
		e := &end{}
		e.ctx, _ = provider.Open(dev)
		e.pd, _ = as[*provider.PD](e.ctx.AllocPD())
		e.cq, _ = as[*provider.CQ](e.ctx.CreateCQ(verbs.CQInitAttr{CQE: 16}))
		e.qp, _ = as[*provider.QP](e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq,
			Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}))
		e.buf, _ = provider.NewBuffer(4096)
		e.mr, _ = as[*provider.MR](e.pd.RegMR(e.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
		gid, _ := e.ctx.GIDByIndex(1, 0)
		e.ep = verbs.Endpoint{QPN: e.qp.QPN(), PSN: psn, GID: gid.GID}
		return e
	}
	a, b := open("example_0", 100), open("example_1", 200)
	var attr verbs.ConnectAttr // perftest defaults
	if err := verbs.Connect(a.qp, attr, a.ep, b.ep); err != nil {
		panic(err)
	}
	if err := verbs.Connect(b.qp, attr, b.ep, a.ep); err != nil {
		panic(err)
	}

	copy(a.buf.Bytes(), "hello, RDMA")
	err = a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 11)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}})
	if err != nil {
		panic(err)
	}
	var wc [1]verbs.WC
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if n, _ := a.cq.Poll(wc[:]); n == 1 {
			break
		}
	}
	fmt.Println(wc[0].WRID, wc[0].Status, wc[0].Opcode)
	fmt.Println(string(b.buf.Bytes()[:11]))

	for _, e := range []*end{a, b} {
		e.qp.Destroy()
		e.mr.Dereg()
		e.cq.Destroy()
		e.pd.Dealloc()
		e.buf.Free()
		e.ctx.Close()
	}
	// Output:
	// 1 success RDMA_WRITE
	// hello, RDMA
}
