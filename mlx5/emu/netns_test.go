package emu_test

import (
	"bytes"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/uverbs"
)

// udpDevice creates an emulated HCA in namespace ns whose port is RoCEv2 over UDP on the
// veth end v.
func udpDevice(t *testing.T, ns *netnstest.NS, v *netnstest.Veth, name string) *emu.Device {
	t.Helper()
	var link *fabric.UDPLink
	if err := ns.Do(func() (err error) {
		link, err = fabric.ListenUDP(v.Addr.Addr())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	d, err := emu.NewDevice(emu.DeviceConfig{Name: name, Ports: []emu.PortConfig{{Link: link, Netdev: v.Name, NetdevMTU: 1500}}})
	if err != nil {
		link.Close()
		t.Fatal(err)
	}
	emutest.Adopt(t, d, func() { link.Close() })
	return d
}

// The issue-3 scenario over real RoCEv2: two hosts in two network namespaces joined by a veth
// pair. RC traffic works; `ip link set dev X down` in the middle of a 1 MiB WRITE leaves a
// prefix at the responder, RETRY_EXC_ERR and then flush errors at the requester, and
// IBV_EVENT_PORT_ERR on its async fd.
func TestRoCEv2OverVethLinkDown(t *testing.T) {
	netnstest.Require(t)
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc (iproute2) to slow the veth down")
	}
	nsA, nsB := netnstest.New(t), netnstest.New(t)
	va, vb := netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{
		Addrs:           [2]netip.Prefix{netip.MustParsePrefix("10.88.0.1/24"), netip.MustParsePrefix("10.88.0.2/24")},
		StaticNeighbors: true,
	})
	// 50 Mbit/s on A's side: a 1 MiB WRITE takes about 170 ms on the wire, long enough to
	// cut the link in the middle of it.
	nsA.Run(t, "tc", "qdisc", "add", "dev", va.Name, "root", "tbf", "rate", "50mbit", "burst", "16kb", "latency", "2s")
	devA := udpDevice(t, nsA, va, "emlx5_netns_a")
	devB := udpDevice(t, nsB, vb, "emlx5_netns_b")
	conn := emutest.DefaultConn
	conn.Timeout, conn.RetryCnt = 12, 3 // 16.8 ms per try
	p := emutest.NewPairOn(t, devA, devB, emutest.DefaultSize, conn)
	if got := p.A.Dev.Ports()[0].GID(); netip.AddrFrom16(got).Unmap() != va.Addr.Addr() {
		t.Fatalf("GID %x is not ::ffff:%v", got, va.Addr.Addr())
	}
	const size = 1 << 20
	ma := p.A.RegMR(size, emutest.AllAccess)
	mb := p.B.RegMR(size, emutest.AllAccess)
	fill(9, ma.Buf)

	// Traffic over the wire first: WRITE, READ back, FETCH_ADD.
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:8192])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	wantWC(t, "WRITE over UDP", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	if !bytes.Equal(mb.Buf[:8192], ma.Buf[:8192]) {
		t.Fatal("WRITE over UDP: data differs")
	}
	clear(mb.Buf[:8192])

	start := time.Now()
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf)}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	p.QA.Ring()
	// Cut the link once a first part has landed.
	deadline := time.Now().Add(wait)
	for firstDiff(mb.Buf, ma.Buf) < 64<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("1 MiB WRITE over UDP made no progress: %d bytes", firstDiff(mb.Buf, ma.Buf))
		}
		time.Sleep(200 * time.Microsecond)
	}
	va.SetUp(t, false)
	t.Logf("link down after %v", time.Since(start))
	wantWC(t, "1 MiB WRITE across ip link set down", p.SCQA.Wait(t, wait), mlx5.WCRetryExcErr, 0, 0)
	wantWC(t, "next WRITE", p.SCQA.Wait(t, wait), mlx5.WCWRFlushErr, 0, 0)
	landed := firstDiff(mb.Buf, ma.Buf) / 1024 * 1024
	if landed < 64<<10 || landed == size {
		t.Errorf("%d bytes landed: want a proper prefix", landed)
	}
	if i := firstDiff(mb.Buf[landed:], make([]byte, size-landed)); i != size-landed {
		t.Errorf("data beyond the %d-byte prefix reached the responder (at %d)", landed, landed+i)
	}
	t.Logf("%d KiB of 1024 landed before the link went down", landed>>10)
	ev := readAsync(t, p.A.AsyncFD)
	if ev.Type != uverbs.EventPortErr || ev.Element != 1 {
		t.Errorf("async event %+v, want PORT_ERR on port 1", ev)
	}
	if pa, err := uverbs.QueryPort(p.A.File, uverbs.DriverIDMLX5, 1); err != nil || pa.Legacy_resp.State != uverbs.PortDown {
		t.Errorf("port after link down: %v state %d", err, pa.Legacy_resp.State)
	}
}
