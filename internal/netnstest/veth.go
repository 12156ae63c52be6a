package netnstest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Veth is one end of a veth pair.
type Veth struct {
	NS    *NS
	Name  string
	Index int          // ifindex inside NS
	Addr  netip.Prefix // its address and subnet
	MAC   net.HardwareAddr

	peer   *Veth
	static bool
}

// VethConfig describes a veth pair between two namespaces.
type VethConfig struct {
	// Addrs are the two ends' addresses with their prefix, e.g. 10.77.0.1/24 and 10.77.0.2/24.
	// IPv6 addresses are added with nodad so they are usable at once.
	Addrs [2]netip.Prefix
	// Indexes are the two ends' interface indexes; 0 picks the next free one from 100 up
	// in that end's namespace. Explicit indexes matter: two fresh namespaces would otherwise
	// give both ends index 2, and a veth whose index equals its peer's is handled by the
	// kernel's link watch as a physical NIC, with carrier changes rate-limited to one a second.
	Indexes [2]int
	// StaticNeighbors adds permanent neighbour entries for each other's MAC, as a RoCE
	// NIC resolves its peer once: then a link that goes down drops packets at once instead
	// of queueing them behind ARP until it comes back.
	StaticNeighbors bool
	// MTU of both ends; 0 keeps the default (1500).
	MTU int
}

// NewVeth creates a veth pair with one end in a and the other in b, addressed and up, and
// removes it at the end of the test (deleting either end removes both).
func NewVeth(t testing.TB, a, b *NS, cfg VethConfig) (*Veth, *Veth) {
	t.Helper()
	va, vb, err := CreateVeth(a, b, cfg)
	if va != nil {
		t.Cleanup(func() { va.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return va, vb
}

// CreateVeth is NewVeth for callers that are not tests; the first end's Close removes the
// pair (so does deleting either namespace). On error, what was made is removed.
func CreateVeth(a, b *NS, cfg VethConfig) (*Veth, *Veth, error) {
	for i, p := range cfg.Addrs {
		if !p.IsValid() {
			return nil, nil, fmt.Errorf("netnstest: veth end %d has no address", i)
		}
	}
	idx := cfg.Indexes
	for i, ns := range []*NS{a, b} {
		if idx[i] == 0 {
			idx[i] = ns.allocIndex()
			if a == b && i == 1 {
				idx[i] = ns.allocIndex()
			}
		}
	}
	base := uniqueName("sv")
	ends := [2]*Veth{
		{NS: a, Name: base + "a", Index: idx[0], Addr: cfg.Addrs[0]},
		{NS: b, Name: base + "b", Index: idx[1], Addr: cfg.Addrs[1]},
	}
	if _, err := a.Output("ip", "link", "add", ends[0].Name, "index", strconv.Itoa(idx[0]), "type", "veth",
		"peer", "name", ends[1].Name, "index", strconv.Itoa(idx[1]), "netns", b.Name); err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*Veth, *Veth, error) {
		ends[0].Close()
		return nil, nil, err
	}
	for _, e := range ends {
		if cfg.MTU != 0 {
			if _, err := e.NS.Output("ip", "link", "set", "dev", e.Name, "mtu", strconv.Itoa(cfg.MTU)); err != nil {
				return fail(err)
			}
		}
		args := []string{"addr", "add", e.Addr.String(), "dev", e.Name}
		if e.Addr.Addr().Is6() {
			args = append(args, "nodad")
		}
		if _, err := e.NS.Output("ip", args...); err != nil {
			return fail(err)
		}
		if _, err := e.NS.Output("ip", "link", "set", "dev", e.Name, "up"); err != nil {
			return fail(err)
		}
		out, err := e.NS.Output("cat", "/sys/class/net/"+e.Name+"/address")
		if err != nil {
			return fail(err)
		}
		if e.MAC, err = net.ParseMAC(strings.TrimSpace(out)); err != nil {
			return fail(fmt.Errorf("netnstest: MAC of %s: %w", e.Name, err))
		}
		got, err := e.NS.Output("cat", "/sys/class/net/"+e.Name+"/ifindex")
		if err != nil {
			return fail(err)
		}
		if strings.TrimSpace(got) != strconv.Itoa(e.Index) {
			return fail(fmt.Errorf("netnstest: %s has ifindex %s, asked for %d", e.Name, strings.TrimSpace(got), e.Index))
		}
	}
	ends[0].peer, ends[1].peer = ends[1], ends[0]
	for _, e := range ends {
		e.static = cfg.StaticNeighbors
		if err := e.addNeighbor(); err != nil {
			return fail(err)
		}
	}
	return ends[0], ends[1], nil
}

// Close deletes the pair, unless its namespace is already gone (which deleted it).
func (v *Veth) Close() {
	if _, err := os.Stat("/var/run/netns/" + v.NS.Name); err == nil {
		v.NS.Output("ip", "link", "del", v.Name)
	}
}

// addNeighbor installs the permanent neighbour entry for the peer, if the pair has them.
func (v *Veth) addNeighbor() error {
	if !v.static {
		return nil
	}
	_, err := v.NS.Output("ip", "neigh", "replace", v.peer.Addr.Addr().String(), "lladdr", v.peer.MAC.String(),
		"dev", v.Name, "nud", "permanent")
	return err
}

// SetUp sets the link administratively up or down (SetLink) and fails the test if it cannot.
func (v *Veth) SetUp(t testing.TB, up bool) {
	t.Helper()
	if err := v.SetLink(up); err != nil {
		t.Fatal(err)
	}
}

// SetLink sets the link administratively up or down with `ip link set dev X up|down`, as an
// operator or a failure-injection script does. Taking a link down flushes its neighbour
// entries, permanent ones included, so bringing it up restores the static entry. IPv6
// addresses are removed on down by the kernel's default keep_addr_on_down=0; pairs that go
// down and up should use IPv4.
func (v *Veth) SetLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if _, err := v.NS.Output("ip", "link", "set", "dev", v.Name, state); err != nil {
		return err
	}
	if up {
		return v.addNeighbor()
	}
	return nil
}

// String names the end for diagnostics.
func (v *Veth) String() string {
	return fmt.Sprintf("%s (index %d, %v) in %s", v.Name, v.Index, v.Addr, v.NS.Name)
}
