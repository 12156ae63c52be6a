package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeSysfs writes a sysfs tree shaped like a 6.1 kernel's with one mlx5 device (two ports,
// RoCE, netdevs found through the GID attributes and device/net) and one rxe device (netdev
// from the parent file).
func fakeSysfs(t *testing.T, classABI string) Sysfs {
	t.Helper()
	root := t.TempDir()
	w := func(path, content string) {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w("class/infiniband_verbs/abi_version", classABI)
	w("class/infiniband_verbs/uverbs0/ibdev", "mlx5_0")
	w("class/infiniband_verbs/uverbs0/abi_version", "1")
	w("class/infiniband_verbs/uverbs0/dev", "231:192")
	w("class/infiniband_verbs/uverbs1/ibdev", "rxe0")
	w("class/infiniband_verbs/uverbs1/abi_version", "2")
	w("class/infiniband_verbs/uverbs1/dev", "231:193")
	mlx := "class/infiniband/mlx5_0/"
	w(mlx+"node_guid", "b859:9f03:00d1:f6a4")
	w(mlx+"node_type", "1: CA")
	w(mlx+"ports/1/state", "4: ACTIVE")
	w(mlx+"ports/1/phys_state", "5: LinkUp")
	w(mlx+"ports/1/link_layer", "Ethernet")
	w(mlx+"ports/1/gids/0", "fe80:0000:0000:0000:ba59:9fff:fed1:f6a4")
	w(mlx+"ports/1/gids/1", "fe80:0000:0000:0000:ba59:9fff:fed1:f6a4")
	w(mlx+"ports/1/gids/2", "0000:0000:0000:0000:0000:ffff:0a00:0001")
	w(mlx+"ports/1/gids/3", "0000:0000:0000:0000:0000:ffff:0a00:0001")
	w(mlx+"ports/1/gids/4", "0000:0000:0000:0000:0000:0000:0000:0000")
	w(mlx+"ports/1/gid_attrs/types/0", "IB/RoCE v1")
	w(mlx+"ports/1/gid_attrs/types/1", "RoCE v2")
	w(mlx+"ports/1/gid_attrs/types/2", "IB/RoCE v1")
	w(mlx+"ports/1/gid_attrs/types/3", "RoCE v2")
	for i := 0; i < 4; i++ {
		w(mlx+"ports/1/gid_attrs/ndevs/"+string(rune('0'+i)), "ens1f0np0")
	}
	w(mlx+"ports/2/state", "1: DOWN")
	w(mlx+"ports/2/phys_state", "3: Disabled")
	w(mlx+"ports/2/link_layer", "Ethernet")
	if err := os.MkdirAll(filepath.Join(root, mlx, "device/net/ens1f0np0"), 0o755); err != nil {
		t.Fatal(err)
	}
	rxe := "class/infiniband/rxe0/"
	w(rxe+"node_guid", "5054:00ff:fe12:3456")
	w(rxe+"node_type", "1: CA")
	w(rxe+"parent", "dummy0")
	w(rxe+"ports/1/state", "4: ACTIVE")
	w(rxe+"ports/1/phys_state", "5: LinkUp")
	w(rxe+"ports/1/link_layer", "Ethernet")
	return Sysfs{Root: root, DevRoot: filepath.Join(root, "dev")}
}

func TestSysfsDevices(t *testing.T) {
	s := fakeSysfs(t, "6")
	devs, err := s.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[0].Name != "mlx5_0" || devs[1].Name != "rxe0" {
		t.Fatalf("devices %+v", devs)
	}
	m := devs[0]
	if m.Uverbs != "uverbs0" || m.ABIVersion != 1 || m.Dev != "231:192" || m.NodeGUID != "b859:9f03:00d1:f6a4" ||
		m.Path != filepath.Join(s.DevRoot, "uverbs0") || len(m.Ports) != 2 {
		t.Fatalf("mlx5_0 %+v", m)
	}
	p1, _ := m.Port(1)
	if p1.State != PortActive || p1.StateName != "ACTIVE" || p1.LinkLayer != "Ethernet" || p1.Netdev != "ens1f0np0" {
		t.Errorf("port 1 %+v", p1)
	}
	if len(p1.GIDs) != 4 || p1.GIDs[3].Type != "RoCE v2" || p1.GIDs[3].GIDType() != GIDTypeRoCEv2 ||
		p1.GIDs[0].GIDType() != GIDTypeRoCEv1 || p1.GIDs[3].GID.String() != "10.0.0.1" {
		t.Errorf("gids %+v", p1.GIDs)
	}
	p2, _ := m.Port(2)
	if p2.State != PortDown || len(p2.GIDs) != 0 || p2.Netdev != "ens1f0np0" {
		t.Errorf("port 2 %+v (netdev from device/net)", p2)
	}
	r := devs[1]
	if rp, _ := r.Port(1); rp.Netdev != "dummy0" || r.ABIVersion != 2 {
		t.Errorf("rxe0 %+v", r)
	}
	if err := m.CheckDriverABI(1, 1); err != nil {
		t.Error(err)
	}
	if err := r.CheckDriverABI(1, 1); !errors.Is(err, ErrABIVersion) {
		t.Errorf("rxe against mlx5's range: %v", err)
	}
	es := GIDEntriesFromSysfs(p1, func(string) uint32 { return 4 })
	if len(es) != 4 || es[3].Gid_index != 3 || es[3].Port_num != 1 || es[3].Gid_type != GIDTypeRoCEv2 ||
		es[3].Netdev_ifindex != 4 || es[3].GIDBytes()[10] != 0xff || es[3].GIDBytes()[15] != 1 {
		t.Errorf("entries %+v", es)
	}
}

func TestSysfsNoRDMA(t *testing.T) {
	devs, err := Sysfs{Root: t.TempDir()}.Devices()
	if err != nil || len(devs) != 0 {
		t.Fatalf("%v %v", devs, err)
	}
	_, _, err = Sysfs{Root: t.TempDir()}.Open("mlx5_0")
	if !errors.Is(err, ErrNoDevice) {
		t.Errorf("open: %v", err)
	}
}

func TestOpenChecksABIAndDevice(t *testing.T) {
	s := fakeSysfs(t, "5")
	if _, _, err := s.Open("mlx5_0"); !errors.Is(err, ErrABIVersion) {
		t.Errorf("class abi 5: %v", err)
	}
	s = fakeSysfs(t, "6")
	// The device node does not exist in the fake /dev: the open error carries ENOENT.
	if _, _, err := s.Open("mlx5_0"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("missing cdev: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	s := fakeSysfs(t, "6")
	opened := 0
	k := &fakeKernel{}
	unreg, err := Register(DeviceInfo{Name: "shift_emu0", ABIVersion: 1, Ports: []PortInfo{{Num: 1, State: PortActive}}},
		func() (File, error) { opened++; return k, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer unreg()
	if _, err := Register(DeviceInfo{Name: "shift_emu0"}, func() (File, error) { return k, nil }); !errors.Is(err, os.ErrExist) {
		t.Errorf("duplicate register: %v", err)
	}
	devs, err := s.ListAll()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, d := range devs {
		names = append(names, d.Name)
	}
	if len(devs) != 3 || devs[2].Name != "shift_emu0" || !devs[2].Emulated || devs[0].Emulated {
		t.Fatalf("devices %v", names)
	}
	f, info, err := s.Open("shift_emu0")
	if err != nil || f != File(k) || opened != 1 || info.Ports[0].State != PortActive {
		t.Fatalf("open: %v %v %d", f, err, opened)
	}
	unreg()
	if _, _, err := s.Open("shift_emu0"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("after unregister: %v", err)
	}
}

func TestGIDTableFallsBackToSysfs(t *testing.T) {
	s := fakeSysfs(t, "6")
	devs, err := s.Devices()
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{ioctl: func(r *IoctlRequest) error { return unix.EPROTONOSUPPORT }}
	es, err := GIDTable(k, 0, 16, devs[0], nil)
	if err != nil || len(es) != 4 || es[1].Gid_type != GIDTypeRoCEv2 {
		t.Fatalf("fallback: %v %+v", err, es)
	}
	k.ioctl = func(r *IoctlRequest) error { return unix.EINVAL }
	if _, err := GIDTable(k, 0, 16, devs[0], nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a real error must not fall back: %v", err)
	}
	k.ioctl = func(r *IoctlRequest) error {
		e := GIDEntry{Gid_index: 7, Port_num: 1, Gid_type: GIDTypeRoCEv2}
		if err := r.Out(AttrQueryGIDTableRespEntries, structBytes(&e)); err != nil {
			return err
		}
		return r.Out(AttrQueryGIDTableRespNumEntries, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
	if es, err := GIDTable(k, 0, 16, devs[0], nil); err != nil || len(es) != 1 || es[0].Gid_index != 7 {
		t.Errorf("ioctl path: %v %+v", err, es)
	}
}

func TestQueryDeviceAnyFallsBack(t *testing.T) {
	calls := 0
	k := &fakeKernel{write: func(w *WriteRequest) error {
		calls++
		if w.Extended {
			return unix.EOPNOTSUPP
		}
		if err := w.CheckSizes(sizeOf[QueryDeviceCmd](), sizeOf[QueryDeviceResp]()); err != nil {
			return err
		}
		r := QueryDeviceResp{Max_qp: 99, Phys_port_cnt: 2}
		return w.Respond(structBytes(&r))
	}}
	r, err := QueryDeviceAny(k)
	if err != nil || calls != 2 || r.Base.Max_qp != 99 || r.Response_length != uint32(sizeOf[QueryDeviceResp]()) {
		t.Fatalf("%+v %v calls %d", r, err, calls)
	}
}
