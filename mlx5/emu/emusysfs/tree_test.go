package emusysfs_test

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
	"github.com/shift-rdma/shift/uverbs"
)

// TestTreeReadsBackAsDiscovery writes two devices and reads them with the same sysfs
// discovery the provider uses: names, uverbs numbers, modaliases, ports, the GID at index 0
// with its type and netdev; then removes everything it made.
func TestTreeReadsBackAsDiscovery(t *testing.T) {
	root, devDir := t.TempDir(), t.TempDir()
	devs := []emusysfs.Device{
		{Name: "shift0", IP: netip.MustParseAddr("127.77.5.1"), Netdev: "lo"},
		{Name: "shift1", IP: netip.MustParseAddr("127.77.5.2"), Identity: emusysfs.ConnectX},
	}
	tr, err := emusysfs.Create(root, devs, emusysfs.Options{DevDir: devDir, FirstUverbs: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emusysfs.Create(root, devs, emusysfs.Options{DevDir: devDir}); !errors.Is(err, emusysfs.ErrExists) {
		t.Fatalf("second Create over the same root: %v, want ErrExists", err)
	}
	if tr.Uverbs["shift0"] != "uverbs7" || tr.Uverbs["shift1"] != "uverbs8" {
		t.Errorf("uverbs numbers %v", tr.Uverbs)
	}
	for _, uv := range []string{"uverbs7", "uverbs8"} {
		if target, err := os.Readlink(filepath.Join(devDir, uv)); err != nil || target != "/dev/full" {
			t.Errorf("stand-in %s -> %q (%v), want /dev/full", uv, target, err)
		}
	}
	got, err := uverbs.Sysfs{Root: root, DevRoot: devDir}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("discovery found %d devices, want 2: %+v", len(got), got)
	}
	want := map[string]string{"shift0": emusysfs.ShiftModalias, "shift1": emusysfs.ConnectXModalias}
	for _, d := range got {
		if d.Modalias != want[d.Name] || d.ABIVersion != 1 || d.NodeType != "1: CA" {
			t.Errorf("%s: modalias %q abi %d type %q", d.Name, d.Modalias, d.ABIVersion, d.NodeType)
		}
		if len(d.Ports) != 1 || len(d.Ports[0].GIDs) != 1 {
			t.Fatalf("%s: ports %+v, want one port with one populated GID", d.Name, d.Ports)
		}
		g := d.Ports[0].GIDs[0]
		ip := map[string]string{"shift0": "127.77.5.1", "shift1": "127.77.5.2"}[d.Name]
		if g.Index != 0 || g.Type != "RoCE v2" || !g.GID.Equal(net.ParseIP(ip)) {
			t.Errorf("%s: GID %+v, want index 0 RoCE v2 %s", d.Name, g, ip)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "class/infiniband/shift1/device", emusysfs.Marker)); err != nil {
		t.Errorf("ConnectX identity without the marker: %v", err)
	}
	loaded, err := emusysfs.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Remove(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(devDir); len(ents) != 0 {
		t.Errorf("stand-ins left: %v", ents)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("root left behind: %v", err)
	}
}

func TestGIDString(t *testing.T) {
	g := netip.MustParseAddr("10.1.2.3").As16()
	if got := emusysfs.GIDString(g); got != "0000:0000:0000:0000:0000:ffff:0a01:0203" {
		t.Errorf("GIDString = %s", got)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	for _, devs := range [][]emusysfs.Device{
		nil,
		{{Name: "a/b", IP: netip.MustParseAddr("127.0.0.9")}},
		{{Name: "x", IP: netip.MustParseAddr("127.0.0.9")}, {Name: "x", IP: netip.MustParseAddr("127.0.0.8")}},
		{{Name: "y"}},
		{{Name: "z", IP: netip.MustParseAddr("127.0.0.9"), Identity: "mellanox"}},
	} {
		if _, err := emusysfs.Create(t.TempDir(), devs, emusysfs.Options{NoStandIns: true}); err == nil {
			t.Errorf("Create(%+v) succeeded", devs)
		}
	}
}
