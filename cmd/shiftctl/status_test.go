package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider/verbs"
	"golang.org/x/sys/unix"
)

// writeTree writes files (path → content) under a fresh temporary root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fakeSysfs is a 6.x kernel's tree with one two-port mlx5 device (port 1 ACTIVE with RoCE
// v1/v2 GIDs on ens1f0np0, port 2 DOWN) and the netdev ens1f0np0, which has lost its
// carrier three times.
func fakeSysfs(t *testing.T) string {
	mlx := "class/infiniband/mlx5_0/"
	files := map[string]string{
		"class/infiniband_verbs/abi_version":         "6",
		"class/infiniband_verbs/uverbs0/ibdev":       "mlx5_0",
		"class/infiniband_verbs/uverbs0/abi_version": "1",
		"class/infiniband_verbs/uverbs0/dev":         "231:192",
		mlx + "node_guid":                            "b859:9f03:00d1:f6a4",
		mlx + "node_type":                            "1: CA",
		mlx + "ports/1/state":                        "4: ACTIVE",
		mlx + "ports/1/phys_state":                   "5: LinkUp",
		mlx + "ports/1/link_layer":                   "Ethernet",
		mlx + "ports/1/gids/0":                       "fe80:0000:0000:0000:ba59:9fff:fed1:f6a4",
		mlx + "ports/1/gids/1":                       "0000:0000:0000:0000:0000:ffff:0a00:0001",
		mlx + "ports/1/gids/2":                       "0000:0000:0000:0000:0000:0000:0000:0000",
		mlx + "ports/1/gid_attrs/types/0":            "IB/RoCE v1",
		mlx + "ports/1/gid_attrs/types/1":            "RoCE v2",
		mlx + "ports/1/gid_attrs/ndevs/0":            "ens1f0np0",
		mlx + "ports/1/gid_attrs/ndevs/1":            "ens1f0np0",
		mlx + "ports/2/state":                        "1: DOWN",
		mlx + "ports/2/phys_state":                   "3: Disabled",
		mlx + "ports/2/link_layer":                   "Ethernet",
		mlx + "device/net/ens1f0np0/ifindex":         "4",
		"class/net/ens1f0np0/operstate":              "up",
		"class/net/ens1f0np0/carrier":                "1",
		"class/net/ens1f0np0/carrier_down_count":     "3",
		"class/net/ens1f0np0/mtu":                    "9000",
	}
	return writeTree(t, files)
}

// statusJSON runs `shiftctl status -json -sysfs root` and decodes its report; it returns the
// text too, for failure messages.
func statusJSON(t *testing.T, root string) (statusReport, string) {
	t.Helper()
	var out, errw strings.Builder
	if code := run([]string{"status", "-json", "-sysfs", root}, &out, &errw); code != 0 {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return rep, out.String()
}

func TestStatusFakeSysfs(t *testing.T) {
	root := fakeSysfs(t)
	rep, _ := statusJSON(t, root)
	var d *deviceStatus
	for i := range rep.Devices {
		if rep.Devices[i].Name == "mlx5_0" {
			d = &rep.Devices[i]
		}
	}
	if d == nil || d.Uverbs != "uverbs0" || d.Emulated || d.Queried || len(d.Ports) != 2 {
		t.Fatalf("device %+v", rep.Devices)
	}
	p1, p2 := d.Ports[0], d.Ports[1]
	if p1.State != "ACTIVE" || p1.LinkLayer != "Ethernet" || p1.Netdev != "ens1f0np0" || len(p1.GIDs) != 2 ||
		p1.GIDs[1].GID != "10.0.0.1" || p1.GIDs[1].Type != "RoCE v2" || p1.GIDs[1].Netdev != "ens1f0np0" || p1.ActiveMTU != 0 {
		t.Errorf("port 1 %+v", p1)
	}
	if p2.State != "DOWN" || p2.PhysState != "3: Disabled" || len(p2.GIDs) != 0 {
		t.Errorf("port 2 %+v", p2)
	}
	if len(rep.Netdevs) != 1 {
		t.Fatalf("netdevs %+v", rep.Netdevs)
	}
	n := rep.Netdevs[0]
	if n.Name != "ens1f0np0" || !n.Present || n.OperState != "up" || n.Carrier == nil || *n.Carrier != 1 ||
		n.CarrierDownCount == nil || *n.CarrierDownCount != 3 || n.MTU != 9000 || n.Error != "" {
		t.Errorf("netdev %+v", n)
	}

	var out, errw strings.Builder
	if code := run([]string{"status", "-sysfs", root}, &out, &errw); code != 0 {
		t.Fatalf("table: exit %d: %s", code, errw.String())
	}
	for _, want := range []string{"DEVICE", "mlx5_0", "uverbs0", "ACTIVE", "DOWN", "10.0.0.1", "RoCE v2",
		"CARRIER_DOWN_COUNT", "ens1f0np0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	// The netdev row carries operstate, carrier, carrier_down_count and MTU in that order.
	if !containsFields(out.String(), "ens1f0np0", "up", "1", "3", "9000") {
		t.Errorf("netdev row:\n%s", out.String())
	}
}

// containsFields reports whether some line of s consists of exactly these fields.
func containsFields(s string, fields ...string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.Join(strings.Fields(l), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// A netdev whose interface is administratively down answers EINVAL for carrier: that is
// "unknown", not an error; an unreadable carrier_down_count is an error naming the file.
func TestStatusNetdevReadErrors(t *testing.T) {
	root := writeTree(t, map[string]string{
		"class/net/d0/operstate":          "down",
		"class/net/d0/carrier_down_count": "x",
		"class/net/d0/mtu":                "1500",
	})
	n := readNetdev(root, "d0")
	if !n.Present || n.OperState != "down" || n.Carrier != nil || n.MTU != 1500 ||
		!strings.Contains(n.Error, "read carrier: ") || !strings.Contains(n.Error, "no such file") ||
		!strings.Contains(n.Error, `parse carrier_down_count "x"`) {
		t.Errorf("%+v", n)
	}
	if n := readNetdev(root, "absent0"); n.Present || n.Error != "" {
		t.Errorf("absent: %+v", n)
	}
	if n := readNetdev(root, "../d0"); n.Present || n.Error == "" {
		t.Errorf("path in a name: %+v", n)
	}
}

func TestStatusNoDevices(t *testing.T) {
	root := emptySysfs(t)
	var out, errw strings.Builder
	if code := run([]string{"status", "-sysfs", root}, &out, &errw); code != 0 {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	if !strings.HasPrefix(out.String(), "no RDMA devices (none under "+root) {
		t.Errorf("%q", out.String())
	}
	out.Reset()
	if rep, text := statusJSON(t, root); rep.Devices == nil || len(rep.Devices) != 0 {
		t.Errorf("%q", text)
	}
	if code := run([]string{"status", "extra"}, &out, &errw); code != 2 {
		t.Errorf("extra argument: exit %d", code)
	}
}

// Emulated devices registered in this process are listed next to the sysfs ones and
// queried live: the MTU follows the netdev MTU, and a port whose link went down reads DOWN
// although discovery registered it ACTIVE.
func TestStatusEmulated(t *testing.T) {
	prefix := fmt.Sprintf("st%d_", os.Getpid())
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, NetdevMTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Error(err)
		}
	})
	cl.Endpoint(0, 1, 1).SetLinkUp(false) // host 0, NIC 1: device prefix+"1"
	rep, err := collectStatus(fakeSysfs(t), providerQuerier)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]deviceStatus{}
	for _, d := range rep.Devices {
		got[d.Name] = d
	}
	if _, ok := got["mlx5_0"]; !ok {
		t.Errorf("the sysfs device is missing: %+v", rep.Devices)
	}
	for i := range 4 {
		name := fmt.Sprintf("%s%d", prefix, i)
		d, ok := got[name]
		if !ok {
			t.Fatalf("%s not listed: %+v", name, rep.Devices)
		}
		if !d.Emulated || !d.Queried || d.QueryError != "" || len(d.Ports) != 1 {
			t.Fatalf("%s: %+v", name, d)
		}
		p := d.Ports[0]
		want := "ACTIVE"
		if i == 1 {
			want = "DOWN"
		}
		if p.State != want || p.ActiveMTU != 1024 || p.LinkLayer != "Ethernet" || len(p.GIDs) != 1 ||
			p.GIDs[0].Type != "RoCE v2" || p.Netdev == "" || p.GIDs[0].Netdev != p.Netdev {
			t.Errorf("%s port %+v, want state %s, MTU 1024", name, p, want)
		}
	}
	// The emulated ports' netdevs are not in the sysfs tree: listed as absent, no error.
	for _, n := range rep.Netdevs {
		if n.Name != "ens1f0np0" && (n.Present || n.Error != "") {
			t.Errorf("netdev %+v", n)
		}
	}
	var out strings.Builder
	if err := rep.writeTable(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("table:\n%s", out.String())
	nd := got[prefix+"1"].Ports[0].Netdev
	if !containsFields(out.String(), prefix+"1", "emulated", "1", "DOWN", "-", "1024", "Ethernet", nd) {
		t.Errorf("no row for the downed port in the table")
	}
}

// A device that cannot be opened keeps its discovered state, has no MTU, and says why it
// was not queried; the table repeats the reason.
func TestStatusQueryError(t *testing.T) {
	prefix := fmt.Sprintf("sq%d_", os.Getpid())
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, Register: true, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	fail := func(name string) (func(uint8) (verbs.PortAttr, error), func() error, error) {
		return nil, nil, fmt.Errorf("provider: open %s: %w", name, unix.EACCES)
	}
	rep, err := collectStatus(emptySysfs(t), fail)
	if err != nil {
		t.Fatal(err)
	}
	var d *deviceStatus
	for i := range rep.Devices {
		if rep.Devices[i].Name == prefix+"0" {
			d = &rep.Devices[i]
		}
	}
	if d == nil || d.Queried || d.QueryError != "provider: open "+prefix+"0: permission denied" ||
		d.Ports[0].State != "ACTIVE" || d.Ports[0].ActiveMTU != 0 {
		t.Fatalf("%+v", rep.Devices)
	}
	var out strings.Builder
	if err := rep.writeTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), prefix+"0: not queried (port state from discovery, MTU unknown): provider: open "+prefix+"0: permission denied") {
		t.Errorf("table:\n%s", out.String())
	}
}

// The usage text names every command and every flag of the operator commands, and -h
// prints a command's part of it on stdout with exit status 0.
func TestUsage(t *testing.T) {
	var out, errw strings.Builder
	if code := run([]string{"help"}, &out, &errw); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, want := range []string{"status [-json] [-sysfs ROOT] [-w DURATION [-n N]]", "-json ", "-sysfs ROOT ",
		"-w DURATION ", "-n N ", "metrics -listen ADDR", "-listen ADDR ",
		"inject -pid PID", "-pid PID ", "-qpn QPN ", "-n N ", "-file PATH ",
		"kv get|put|list|purge", "-kv URL ", "-job JOB ", "-hex ", "-timeout D ", "perf ", "demo "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	for cmd, want := range map[string]string{"status": statusUsage, "metrics": metricsUsage, "inject": injectUsage, "kv": kvUsage} {
		out.Reset()
		if code := run([]string{cmd, "-h"}, &out, &errw); code != 0 || out.String() != want+"\n" {
			t.Errorf("%s -h: exit %d: %q", cmd, code, out.String())
		}
	}
	if code := run([]string{"frobnicate"}, &out, &errw); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

// emptySysfs is a sysfs tree without RDMA devices (its class/ directory only).
func emptySysfs(t *testing.T) string {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "class"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestStatusBadSysfs: a -sysfs root that is not a sysfs tree is an error, not "no devices".
func TestStatusBadSysfs(t *testing.T) {
	var out, errw strings.Builder
	if code := run([]string{"status", "-sysfs", filepath.Join(t.TempDir(), "nosuch")}, &out, &errw); code == 0 ||
		!strings.Contains(errw.String(), "not a sysfs tree") {
		t.Errorf("exit %d, stderr %q, stdout %q", code, errw.String(), out.String())
	}
}
