package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Sysfs discovers uverbs devices the way libibverbs does without netlink: class/infiniband_verbs
// lists the command devices (uverbsN with ibdev, abi_version, dev) and class/infiniband/<ibdev>
// describes the RDMA device, its ports and their GID tables. Root and DevRoot are injectable so
// tests can point them at a fake tree.
type Sysfs struct {
	Root    string // sysfs mount point; "" means /sys
	DevRoot string // directory of the uverbs character devices; "" means /dev/infiniband
}

// DeviceInfo describes one RDMA device with a uverbs command device.
type DeviceInfo struct {
	Name       string // the ibdev name, e.g. mlx5_0 or rxe0
	Uverbs     string // uverbsN
	Path       string // character device path
	Dev        string // "major:minor" from sysfs
	ABIVersion int    // uverbsN/abi_version: the driver's uverbs ABI (mlx5: 1, rxe: 2)
	NodeGUID   string // as sysfs prints it, e.g. 0002:c903:0031:7d41
	NodeType   string // e.g. "1: CA"
	Modalias   string // device/modalias, which providers match on ("" when there is none)
	Ports      []PortInfo
	Emulated   bool // registered by an emulated kernel rather than found in sysfs
}

// PortInfo describes one port of a device.
type PortInfo struct {
	Num       int
	State     int    // enum ib_port_state (PortActive, PortDown, ...)
	StateName string // e.g. "ACTIVE"
	PhysState string // e.g. "5: LinkUp"
	LinkLayer string // "Ethernet" or "InfiniBand"
	Netdev    string // the netdev this port runs over ("" when there is none, e.g. IB)
	GIDs      []GIDInfo
}

// GIDInfo is one populated GID table entry.
type GIDInfo struct {
	Index  int
	GID    net.IP // 16 bytes
	Type   string // "IB/RoCE v1" or "RoCE v2" as sysfs spells it
	Netdev string // gid_attrs/ndevs/<index>
}

// GIDType maps the sysfs GID type to enum ib_uverbs_gid_type.
func (g GIDInfo) GIDType() uint32 {
	switch g.Type {
	case "RoCE v2":
		return GIDTypeRoCEv2
	case "IB/RoCE v1":
		return GIDTypeRoCEv1
	}
	return GIDTypeIB
}

func (s Sysfs) root() string {
	if s.Root == "" {
		return "/sys"
	}
	return s.Root
}

func (s Sysfs) devRoot() string {
	if s.DevRoot == "" {
		return "/dev/infiniband"
	}
	return s.DevRoot
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ClassABIVersion reads class/infiniband_verbs/abi_version, the uverbs core's ABI version.
func (s Sysfs) ClassABIVersion() (int, error) {
	v, err := readTrim(filepath.Join(s.root(), "class/infiniband_verbs/abi_version"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// Devices lists every device that has a uverbs command device, sorted by name. No uverbs class
// at all (no RDMA subsystem) gives an empty list, not an error.
func (s Sysfs) Devices() ([]DeviceInfo, error) {
	dir := filepath.Join(s.root(), "class/infiniband_verbs")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("uverbs: sysfs: %w", err)
	}
	var out []DeviceInfo
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		d, err := s.device(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s Sysfs) device(uverbs string) (DeviceInfo, error) {
	ud := filepath.Join(s.root(), "class/infiniband_verbs", uverbs)
	d := DeviceInfo{Uverbs: uverbs, Path: filepath.Join(s.devRoot(), uverbs)}
	var err error
	if d.Name, err = readTrim(filepath.Join(ud, "ibdev")); err != nil {
		return d, fmt.Errorf("uverbs: sysfs %s: %w", uverbs, err)
	}
	abi, err := readTrim(filepath.Join(ud, "abi_version"))
	if err != nil {
		return d, fmt.Errorf("uverbs: sysfs %s: %w", uverbs, err)
	}
	if d.ABIVersion, err = strconv.Atoi(abi); err != nil {
		return d, fmt.Errorf("uverbs: sysfs %s abi_version %q: %w", uverbs, abi, ErrMalformed)
	}
	d.Dev, _ = readTrim(filepath.Join(ud, "dev"))
	ib := filepath.Join(s.root(), "class/infiniband", d.Name)
	d.NodeGUID, _ = readTrim(filepath.Join(ib, "node_guid"))
	d.NodeType, _ = readTrim(filepath.Join(ib, "node_type"))
	d.Modalias, _ = readTrim(filepath.Join(ib, "device/modalias"))
	ports, err := os.ReadDir(filepath.Join(ib, "ports"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("uverbs: sysfs %s ports: %w", d.Name, err)
	}
	for _, p := range ports {
		n, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		pi, err := s.port(ib, n)
		if err != nil {
			return d, err
		}
		d.Ports = append(d.Ports, pi)
	}
	sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Num < d.Ports[j].Num })
	return d, nil
}

func (s Sysfs) port(ib string, n int) (PortInfo, error) {
	pd := filepath.Join(ib, "ports", strconv.Itoa(n))
	p := PortInfo{Num: n}
	st, err := readTrim(filepath.Join(pd, "state"))
	if err != nil {
		return p, fmt.Errorf("uverbs: sysfs %s: %w", pd, err)
	}
	// "4: ACTIVE"
	num, name, _ := strings.Cut(st, ":")
	p.State, _ = strconv.Atoi(strings.TrimSpace(num))
	p.StateName = strings.TrimSpace(name)
	p.PhysState, _ = readTrim(filepath.Join(pd, "phys_state"))
	p.LinkLayer, _ = readTrim(filepath.Join(pd, "link_layer"))
	gids, _ := os.ReadDir(filepath.Join(pd, "gids"))
	for _, g := range gids {
		idx, err := strconv.Atoi(g.Name())
		if err != nil {
			continue
		}
		txt, err := readTrim(filepath.Join(pd, "gids", g.Name()))
		if err != nil {
			continue // the kernel answers EINVAL for some unpopulated entries
		}
		ip := net.ParseIP(txt)
		if ip == nil || ip.IsUnspecified() {
			continue
		}
		gi := GIDInfo{Index: idx, GID: ip.To16()}
		gi.Type, _ = readTrim(filepath.Join(pd, "gid_attrs/types", g.Name()))
		gi.Netdev, _ = readTrim(filepath.Join(pd, "gid_attrs/ndevs", g.Name()))
		p.GIDs = append(p.GIDs, gi)
	}
	sort.Slice(p.GIDs, func(i, j int) bool { return p.GIDs[i].Index < p.GIDs[j].Index })
	p.Netdev = portNetdev(ib, p)
	return p, nil
}

// portNetdev maps an RDMA port to its netdev: the netdev of the port's first populated GID
// (how rdma-core's ibdev2netdev does it for RoCE), else the single entry of device/net (a
// PCI function with one netdev), else the rxe-style "parent" file.
func portNetdev(ib string, p PortInfo) string {
	for _, g := range p.GIDs {
		if g.Netdev != "" {
			return g.Netdev
		}
	}
	if ents, err := os.ReadDir(filepath.Join(ib, "device/net")); err == nil && len(ents) == 1 {
		return ents[0].Name()
	}
	if parent, err := readTrim(filepath.Join(ib, "parent")); err == nil {
		return parent
	}
	return ""
}

// Port returns the port numbered n.
func (d DeviceInfo) Port(n int) (PortInfo, bool) {
	for _, p := range d.Ports {
		if p.Num == n {
			return p, true
		}
	}
	return PortInfo{}, false
}
