package emu_test

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
)

// benchWrite measures RDMA WRITEs of size bytes between two emulated hosts on the in-process
// fabric, driven exactly as a provider drives the device: WQEs in the SQ ring, one doorbell per
// batch, only the batch's last WR signaled, the CQ polled.
func benchWrite(b *testing.B, size, batch int) {
	c := emutest.NewCluster(b, emu.ClusterConfig{Hosts: 2, Seed: 1})
	p := emutest.NewPair(b, c, emutest.QPSize{SQWQEBBs: 256, RQWQEs: 16, RecvSGE: 1}, emutest.DefaultConn)
	ma := p.A.RegMR(size, emutest.AllAccess)
	mb := p.B.RegMR(size, emutest.AllAccess)
	sge := []mlx5.DataSeg{emutest.SGE(ma, ma.Buf)}
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		n := min(batch, b.N-done)
		for i := range n {
			p.QA.Post(b, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: sge, RemoteAddr: mb.Addr(), RKey: mb.RKey, Unsignaled: i != n-1})
		}
		p.QA.Ring()
		if wc := p.SCQA.Wait(b, wait); wc.Status != mlx5.WCSuccess {
			b.Fatalf("WRITE: %v", wc.Status)
		}
		done += n
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "writes/s")
}

func BenchmarkWrite64(b *testing.B)  { benchWrite(b, 64, 32) }
func BenchmarkWrite64K(b *testing.B) { benchWrite(b, 64<<10, 8) }
