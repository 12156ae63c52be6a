package emu_test

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/uverbs"
)

func newCluster(t *testing.T, cfg emu.ClusterConfig) *emu.Cluster {
	t.Helper()
	c, err := emu.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	return c
}

func wantErrno(t *testing.T, what string, err error, want unix.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

func TestQueries(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1, NICs: 2})
	dev := c.Hosts[0].Devices[1]
	x := emutest.Open(t, dev)

	d, err := uverbs.QueryDevice(x.File)
	if err != nil {
		t.Fatal(err)
	}
	if d.Base.Vendor_id != 0x02c9 || d.Base.Vendor_part_id != 4123 || d.Base.Phys_port_cnt != 1 || d.Base.Node_guid != dev.NodeGUID() {
		t.Errorf("query device: %+v", d.Base)
	}
	if d.Base.Max_qp_rd_atom != 16 || d.Base.Max_qp_wr != 1<<15 || d.Base.Atomic_cap != 1 {
		t.Errorf("caps: %+v", d.Base)
	}
	legacy, err := uverbs.QueryDeviceLegacy(x.File)
	if err != nil || legacy != d.Base {
		t.Errorf("legacy query device %v: %+v", err, legacy)
	}
	p, err := uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Legacy_resp.State != uverbs.PortActive || p.Legacy_resp.Active_mtu != uverbs.MTU4096 || p.Legacy_resp.Link_layer != uverbs.LinkLayerEthernet {
		t.Errorf("query port: %+v", p.Legacy_resp)
	}
	pw, err := uverbs.QueryPortWrite(x.File, 1)
	if err != nil || pw != p.Legacy_resp {
		t.Errorf("query port (write) %v: %+v", err, pw)
	}
	_, err = uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 2)
	wantErrno(t, "query port 2", err, unix.EINVAL)
	_, err = uverbs.QueryPortWrite(x.File, 0)
	wantErrno(t, "query port 0 (write)", err, unix.EINVAL)

	gids, err := uverbs.QueryGIDTable(x.File, uverbs.DriverIDMLX5, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(gids) != 1 {
		t.Fatalf("gid table: %+v", gids)
	}
	want := emu.PortAddr(0, 1, 1).As16() // ::ffff:10.1.0.1
	got := dev.Ports()[0].GID()
	if got != want || gids[0].Gid_type != uverbs.GIDTypeRoCEv2 || gids[0].Port_num != 1 || gids[0].Gid_index != 0 {
		t.Errorf("gid %x type %d, want %x RoCEv2", got, gids[0].Gid_type, want)
	}
	if a := netip.AddrFrom16(got); !a.Is4In6() || a.Unmap() != netip.MustParseAddr("10.1.0.1") {
		t.Errorf("GID %v is not ::ffff:10.1.0.1", a)
	}
	if x.Resp.NumPorts != 1 || x.Resp.BfRegSize != 512 || x.Resp.TotBfregs != emutest.TotalBfregs || x.Resp.CQEVersion != 1 {
		t.Errorf("alloc_ucontext response: %+v", x.Resp)
	}
}
