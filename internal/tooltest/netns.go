package tooltest

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/internal/toolrun"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// NetnsPair is two hosts, A and B, in network namespaces of their own, joined by two data
// rails (veth pairs: rail 0 carries each host's default NIC s0, rail 1 its backup s1) and a
// control link the programs exchange their connection records over, as a cluster's
// management network: a rail that fails does not take the programs' TCP connection with it.
type NetnsPair struct {
	A, B  *Host
	Rails [2][2]*netnstest.Veth // Rails[r][0] is A's end of rail r, [1] B's
	Ctl   [2]*netnstest.Veth
}

// CtlAddr is the control-link address of host h (0: A, 1: B), where servers listen.
func (p *NetnsPair) CtlAddr(h int) string { return p.Ctl[h].Addr.Addr().String() }

// NewNetnsPair builds the two namespaces, their links (static neighbour entries, so a link
// that goes down drops packets at once, as a NIC's does), and each host's sysfs tree with
// devices s0 and s1 on its two rails.
func NewNetnsPair(t testing.TB, b *Build, id emusysfs.Identity) *NetnsPair {
	t.Helper()
	RequireRoot(t)
	nsA, nsB := netnstest.New(t), netnstest.New(t)
	p := &NetnsPair{}
	for r := range 2 {
		a, bb := netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{StaticNeighbors: true,
			Addrs: [2]netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.77.%d.1/24", r)), netip.MustParsePrefix(fmt.Sprintf("10.77.%d.2/24", r))}})
		p.Rails[r] = [2]*netnstest.Veth{a, bb}
	}
	p.Ctl[0], p.Ctl[1] = netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{
		Addrs: [2]netip.Prefix{netip.MustParsePrefix("10.77.9.1/24"), netip.MustParsePrefix("10.77.9.2/24")}})
	for h, ns := range []*netnstest.NS{nsA, nsB} {
		var devs []Device
		for r := range 2 {
			v := p.Rails[r][h]
			devs = append(devs, Device{Name: "s" + strconv.Itoa(r), IP: v.Addr.Addr(), Netdev: v.Name})
		}
		host := NewHost(t, b, ns, id, devs...)
		if h == 0 {
			p.A = host
		} else {
			p.B = host
		}
	}
	return p
}

// Traffic is the bytes an interface of a host's namespace sent and received.
func (p *NetnsPair) Traffic(h int, netdev string) (uint64, error) {
	host := p.A
	if h == 1 {
		host = p.B
	}
	var n uint64
	err := host.NS.Do(func() error {
		s, err := toolrun.ReadNetdev("/proc/thread-self/net/dev")
		if err != nil {
			return err
		}
		st, ok := s[netdev]
		if !ok {
			return fmt.Errorf("no interface %s in %s", netdev, host.NS.Name)
		}
		n = st.TxBytes + st.RxBytes
		return nil
	})
	return n, err
}

// WaitTraffic waits until netdev of host h carried more bytes than since (sent plus
// received), or the program ended, or timeout passed.
func (p *NetnsPair) WaitTraffic(h int, netdev string, since, more uint64, prog *Proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := p.Traffic(h, netdev)
		if err != nil {
			return err
		}
		if n >= since+more {
			return nil
		}
		if prog != nil && prog.Done() {
			return fmt.Errorf("%s ended before %d more bytes crossed %s", prog.Name, more, netdev)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s carried %d bytes in %v, waiting for %d", netdev, n-since, timeout, more)
		}
		time.Sleep(time.Millisecond)
	}
}

// StartPair starts program with args as a server on B's device s0 and, once it listens on a
// port of its own, as the client on A's s0 connecting over the control link; it returns both.
func (p *NetnsPair) StartPair(t testing.TB, m Mode, program string, args ...string) (srv, cli *Proc) {
	t.Helper()
	pt := Port()
	srv = p.B.Start(t, m, program, append([]string{"-d", "s0", "-p", strconv.Itoa(pt)}, args...)...)
	if err := srv.WaitListening(pt, 20*time.Second); err != nil {
		out, _ := srv.Wait(time.Second)
		t.Fatalf("%s server: %v\n%s", program, err, out)
	}
	cli = p.A.Start(t, m, program, append([]string{"-d", "s0", "-p", strconv.Itoa(pt)}, append(args, p.CtlAddr(1))...)...)
	return srv, cli
}
