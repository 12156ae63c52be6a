package netnstest_test

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/shift-rdma/shift/internal/netnstest"
)

func TestNamespacesAndVeth(t *testing.T) {
	a, b := netnstest.New(t), netnstest.New(t)
	if a.Name == b.Name {
		t.Fatal("namespace names collide")
	}
	va, vb := netnstest.NewVeth(t, a, b, netnstest.VethConfig{
		Addrs:           [2]netip.Prefix{netip.MustParsePrefix("10.66.0.1/24"), netip.MustParsePrefix("10.66.0.2/24")},
		Indexes:         [2]int{40, 41},
		StaticNeighbors: true,
	})
	// A function run in a sees a's veth with its index, and the host does not.
	err := a.Do(func() error {
		ifi, err := net.InterfaceByName(va.Name)
		if err != nil {
			return err
		}
		if ifi.Index != 40 || ifi.HardwareAddr.String() != va.MAC.String() {
			t.Errorf("in namespace: %+v, want index 40 MAC %v", ifi, va.MAC)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(va.Name); err == nil {
		t.Fatalf("%s is visible outside its namespace", va.Name)
	}
	// A child process in b sees b's end, its address and the permanent neighbour entry.
	if out := b.Run(t, "ip", "-o", "addr", "show", "dev", vb.Name); !strings.Contains(out, "10.66.0.2/24") {
		t.Fatalf("addresses of %s: %s", vb.Name, out)
	}
	if out := b.Run(t, "ip", "neigh", "show", "dev", vb.Name); !strings.Contains(out, "10.66.0.1") || !strings.Contains(out, "PERMANENT") {
		t.Fatalf("neighbours of %s: %s", vb.Name, out)
	}
	va.SetUp(t, false)
	if out := a.Run(t, "cat", "/sys/class/net/"+va.Name+"/operstate"); strings.TrimSpace(out) != "down" {
		t.Fatalf("operstate after down: %s", out)
	}
	va.SetUp(t, true)
	if out := a.Run(t, "ip", "neigh", "show", "dev", va.Name); !strings.Contains(out, "PERMANENT") {
		t.Fatalf("static neighbour not restored after up: %s", out)
	}
}

func TestCleanupRemovesNamespace(t *testing.T) {
	netnstest.Require(t)
	var name string
	t.Run("inner", func(t *testing.T) {
		name = netnstest.New(t).Name
		if _, err := os.Stat("/var/run/netns/" + name); err != nil {
			t.Fatalf("namespace %s not visible to ip netns: %v", name, err)
		}
	})
	if _, err := os.Stat("/var/run/netns/" + name); !os.IsNotExist(err) {
		t.Fatalf("namespace %s still exists after its test: %v", name, err)
	}
}

// TestTwoPairs joins two namespaces with two veth pairs, one per emulated NIC, as multi-rail
// hosts are wired: each end gets its own index, and each pair carries its own subnet.
func TestTwoPairs(t *testing.T) {
	a, b := netnstest.New(t), netnstest.New(t)
	a0, b0 := netnstest.NewVeth(t, a, b, netnstest.VethConfig{
		Addrs: [2]netip.Prefix{netip.MustParsePrefix("10.67.0.1/24"), netip.MustParsePrefix("10.67.0.2/24")}})
	a1, b1 := netnstest.NewVeth(t, a, b, netnstest.VethConfig{
		Addrs: [2]netip.Prefix{netip.MustParsePrefix("10.67.1.1/24"), netip.MustParsePrefix("10.67.1.2/24")}})
	if a0.Index == a1.Index || b0.Index == b1.Index || a0.Index == 2 || b0.Index == 2 {
		t.Fatalf("indexes %d %d / %d %d", a0.Index, a1.Index, b0.Index, b1.Index)
	}
	a0.SetUp(t, false)
	if out := a.Run(t, "ip", "route", "get", "10.67.1.2"); !strings.Contains(out, a1.Name) {
		t.Fatalf("the second rail does not route over %s: %s", a1.Name, out)
	}
	if out := b.Run(t, "cat", "/sys/class/net/"+b1.Name+"/carrier"); strings.TrimSpace(out) != "1" {
		t.Fatalf("second rail lost carrier when the first went down: %s", out)
	}
}
