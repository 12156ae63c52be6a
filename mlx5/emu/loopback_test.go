package emu_test

import (
	"bytes"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
)

// Two contexts of one device (two processes' worth of files on one HCA) connect QPs to each
// other through the port's own GID, as loopback tests (ibv_rc_pingpong, perftest on one
// device) do.
func TestLoopbackOnOneDevice(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1, Seed: 1})
	dev := c.Hosts[0].Devices[0]
	p := emutest.NewPairOn(t, dev, dev, emutest.DefaultSize, emutest.DefaultConn)
	ma := p.A.RegMR(8192, emutest.AllAccess)
	mb := p.B.RegMR(8192, emutest.AllAccess)
	fill(13, ma.Buf)
	p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[4096:8192]))
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:3000])}})
	wantWC(t, "loopback SEND", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCSend, 0)
	wantWC(t, "loopback receive", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 3000)
	if !bytes.Equal(mb.Buf[4096:7096], ma.Buf[:3000]) {
		t.Error("data differs")
	}
	// Keys of one context are not valid in the other's PD.
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}, RemoteAddr: ma.Addr(), RKey: ma.RKey})
	wantWC(t, "WRITE with an rkey of the requester's own PD", p.SCQA.Wait(t, wait), mlx5.WCRemAccessErr, 0, 0)
}
