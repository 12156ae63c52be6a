package demo

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// toolNet is the network of the tools part of the demo: hosts A and B in network namespaces
// of their own, joined by two data rails (veth pairs; rail 0 carries each host's default
// emulated NIC s0, rail 1 its backup s1) and a control link the programs exchange their
// connection records over, as a cluster's management network.
type toolNet struct {
	ns    [2]*netnstest.NS
	rails [2][2]*netnstest.Veth // rails[r][h]: host h's end of rail r
	ctl   [2]*netnstest.Veth
	trees [2]*emusysfs.Tree
	dir   string
}

// newToolNet builds the namespaces, links and each host's sysfs tree of emulated devices;
// Close removes all of it, also after a partial failure.
func newToolNet() (n *toolNet, err error) {
	n = &toolNet{}
	defer func() {
		if err != nil {
			n.Close()
			n = nil
		}
	}()
	if n.dir, err = os.MkdirTemp("", "shift-demo-tools-"); err != nil {
		return n, err
	}
	for h := range n.ns {
		if n.ns[h], err = netnstest.Create(); err != nil {
			return n, err
		}
	}
	for r := range n.rails {
		a, b, err := netnstest.CreateVeth(n.ns[0], n.ns[1], netnstest.VethConfig{StaticNeighbors: true,
			Addrs: [2]netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.77.%d.1/24", r)), netip.MustParsePrefix(fmt.Sprintf("10.77.%d.2/24", r))}})
		if err != nil {
			return n, err
		}
		n.rails[r] = [2]*netnstest.Veth{a, b}
	}
	if n.ctl[0], n.ctl[1], err = netnstest.CreateVeth(n.ns[0], n.ns[1], netnstest.VethConfig{
		Addrs: [2]netip.Prefix{netip.MustParsePrefix("10.77.9.1/24"), netip.MustParsePrefix("10.77.9.2/24")}}); err != nil {
		return n, err
	}
	for h := range n.trees {
		var devs []emusysfs.Device
		for r := range n.rails {
			v := n.rails[r][h]
			devs = append(devs, emusysfs.Device{Name: "s" + strconv.Itoa(r), IP: v.Addr.Addr(), Netdev: v.Name, Identity: emusysfs.Shift})
		}
		if n.trees[h], err = emusysfs.Create(filepath.Join(n.dir, "host"+strconv.Itoa(h)), devs, emusysfs.Options{}); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close removes the trees (and their /dev/infiniband stand-ins) and the namespaces (and with
// them the links).
func (n *toolNet) Close() error {
	var errs []error
	for _, t := range n.trees {
		if t != nil {
			errs = append(errs, t.Remove())
		}
	}
	for _, ns := range n.ns {
		if ns != nil {
			errs = append(errs, ns.Close())
		}
	}
	if n.dir != "" {
		errs = append(errs, os.RemoveAll(n.dir))
	}
	return errors.Join(errs...)
}
