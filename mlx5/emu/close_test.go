package emu_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/uverbs"
)

// A CQ whose consumer does not keep up overruns: the device stops writing to it and the kernel
// raises IBV_EVENT_CQ_ERR for it on the async fd; destroy_cq reports the event.
func TestCQOverrunEvent(t *testing.T) {
	c := emutest.NewCluster(t, emu.ClusterConfig{Hosts: 2, Seed: 1})
	a := emutest.Open(t, c.Hosts[0].Devices[0])
	b := emutest.Open(t, c.Hosts[1].Devices[0])
	small := a.CreateCQ(4, -1)
	rcq := a.CreateCQ(4, -1)
	qa := a.CreateQP(small, rcq, emutest.DefaultSize)
	bcq := b.CreateCQ(16, -1)
	qb := b.CreateQP(bcq, bcq, emutest.DefaultSize)
	emutest.Connect(t, qa, qb, emutest.DefaultConn)
	ma := a.RegMR(4096, emutest.AllAccess)
	mb := b.RegMR(4096, emutest.AllAccess)
	for range 5 { // one more signaled completion than the CQ holds, none polled
		qa.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:8])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	}
	qa.Ring()
	ev := readAsync(t, a.AsyncFD)
	if ev.Type != uverbs.EventCQErr || ev.Element != small.UserHandle {
		t.Fatalf("event %+v, want CQ_ERR for user handle %#x", ev, small.UserHandle)
	}
	if _, err := uverbs.DestroyQP(a.File, uverbs.DriverIDMLX5, qa.Handle); err != nil {
		t.Fatal(err)
	}
	r, err := uverbs.DestroyCQ(a.File, uverbs.DriverIDMLX5, small.Handle)
	if err != nil || r.Async_events_reported != 1 {
		t.Errorf("destroy cq: %v, async_events_reported %d, want 1", err, r.Async_events_reported)
	}
}

// Closing the command file destroys everything created through it, as the kernel does on the
// last close: the NIC forgets the keys and the QP, a peer's packets to it are dropped, the
// event files see end of file, and later commands fail.
func TestCloseDestroysEverything(t *testing.T) {
	c := emutest.NewCluster(t, emu.ClusterConfig{Hosts: 2, Seed: 1})
	p := emutest.NewPair(t, c, emutest.DefaultSize, emutest.DefaultConn)
	mb := p.B.RegMR(4096, emutest.AllAccess)
	ma := p.A.RegMR(4096, emutest.AllAccess)
	nicB := p.B.Dev.NIC()
	if _, ok := nicB.LookupMR(mb.LKey); !ok {
		t.Fatal("MR unknown to the NIC before close")
	}
	f := p.B.File
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, ok := nicB.LookupMR(mb.LKey); ok {
		t.Error("MR still known to the NIC after close")
	}
	// The async fd and the completion channel read end of file: nobody writes them any more.
	buf := make([]byte, 32)
	for _, fd := range []int{p.B.AsyncFD, p.ChanB} {
		if ok, err := uverbs.WaitReadable(fd, wait); err != nil || !ok {
			t.Errorf("fd %d not readable after close: %v", fd, err)
			continue
		}
		if n, err := unix.Read(fd, buf); n != 0 || err != nil {
			t.Errorf("fd %d after close: read %d, %v; want end of file", fd, n, err)
		}
	}
	before := nicB.Stats().RxNoQP
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	deadline := time.Now().Add(wait)
	for nicB.Stats().RxNoQP == before {
		if time.Now().After(deadline) {
			t.Fatal("packets to the destroyed QP were not dropped as addressed to no QP")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if _, err := uverbs.AllocPD(f, nil, nil); !errors.Is(err, unix.EBADF) {
		t.Errorf("command on a closed file: %v, want EBADF", err)
	}
	p.B.File = nil // already closed
}
