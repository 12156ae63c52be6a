package provider_test

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
)

// netnsTestbed puts each emulated host in its own network namespace, joined by a veth pair:
// the NICs exchange real RoCEv2 datagrams (UDP 4791) through the kernel, and taking the veth
// down fails the link for real. It skips where namespaces cannot be created.
func netnsTestbed(t *testing.T) (*testbed, *netnstest.Veth) {
	t.Helper()
	nsA, nsB := netnstest.New(t), netnstest.New(t)
	subnet := 100 + int(clusterSeq.Add(1)%100)
	va, vb := netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{
		Addrs: [2]netip.Prefix{
			netip.MustParsePrefix(fmt.Sprintf("10.%d.0.1/24", subnet)),
			netip.MustParsePrefix(fmt.Sprintf("10.%d.0.2/24", subnet)),
		},
		StaticNeighbors: true, MTU: 9000,
	})
	tb := &testbed{}
	for i, v := range []*netnstest.Veth{va, vb} {
		var link *fabric.UDPLink
		if err := v.NS.Do(func() (err error) {
			link, err = fabric.ListenUDP(v.Addr.Addr())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("pns%d_%d_%d", os.Getpid(), subnet, i)
		d, err := emu.NewDevice(emu.DeviceConfig{Name: name, Ports: []emu.PortConfig{{Link: link, Netdev: v.Name, NetdevMTU: 9000}}})
		if err != nil {
			link.Close()
			t.Fatal(err)
		}
		un, err := d.Register()
		if err != nil {
			d.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			un()
			if err := d.Close(); err != nil {
				t.Errorf("close %s: %v", name, err)
			}
			// The device does not own its link.
			link.Close()
		})
		tb.names[i] = name
	}
	return tb, vb
}

func TestNetnsRoCEv2EveryOpcodeAndLinkDown(t *testing.T) {
	tb, vb := netnsTestbed(t)
	t.Run("opcodes", func(t *testing.T) { everyOpcodeBody(t, tb) })
	t.Run("linkdown", func(t *testing.T) {
		linkDownBody(t, tb, func() { vb.SetUp(t, false) })
	})
}
