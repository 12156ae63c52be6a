package failover

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
)

// newNetnsEnv puts each emulated host in its own network namespace with two rails (two veth
// pairs): NIC 0 of both hosts on the first, NIC 1 on the second. The NICs exchange real
// RoCEv2 datagrams (UDP 4791) through the kernel, and the default NIC fails with a real
// `ip link set down` of its veth. It skips where namespaces cannot be created.
func newNetnsEnv(t *testing.T) *testEnv { return newNetnsEnvWith(t, nil) }

// newNetnsEnvWith is newNetnsEnv with a hook that adjusts each host's Options.
func newNetnsEnvWith(t *testing.T, hook func(h int, o *Options)) *testEnv {
	t.Helper()
	return newNetnsEnvCfg(t, hook, false)
}

// newNetnsEnvCfg is newNetnsEnvWith; with links each context watches its default veth with a
// probe.Watcher inside the host's namespace (Options.WatchLink).
func newNetnsEnvCfg(t *testing.T, hook func(h int, o *Options), links bool) *testEnv {
	t.Helper()
	nsA, nsB := netnstest.New(t), netnstest.New(t)
	seq := envSeq.Add(1)
	prefix := fmt.Sprintf("fons%d_%d_", os.Getpid(), seq)
	subnet := 100 + int(seq%60)*2
	var rails [2][2]*netnstest.Veth // [nic][host]
	for nic := range 2 {
		va, vb := netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{
			Addrs: [2]netip.Prefix{
				netip.MustParsePrefix(fmt.Sprintf("10.%d.0.1/24", subnet+nic)),
				netip.MustParsePrefix(fmt.Sprintf("10.%d.0.2/24", subnet+nic)),
			},
			StaticNeighbors: true, MTU: 9000,
		})
		rails[nic] = [2]*netnstest.Veth{va, vb}
	}
	for h := range 2 {
		for nic := range 2 {
			v := rails[nic][h]
			var link *fabric.UDPLink
			if err := v.NS.Do(func() (err error) {
				link, err = fabric.ListenUDP(v.Addr.Addr())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s%d", prefix, 2*h+nic)
			d, err := emu.NewDevice(emu.DeviceConfig{Name: name, Ports: []emu.PortConfig{{Link: link, Netdev: v.Name, NetdevMTU: 9000}}})
			if err != nil {
				link.Close()
				t.Fatal(err)
			}
			un, err := d.Register()
			if err != nil {
				d.Close()
				link.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() {
				un()
				if err := d.Close(); err != nil {
					t.Errorf("close %s: %v", name, err)
				}
				link.Close()
			})
		}
	}
	e := &testEnv{kv: kv.NewMem(), attr: fastAttr, prefix: prefix, job: fmt.Sprintf("nsjob%d", seq), hook: hook,
		links: links, linkNS: [2]string{"/var/run/netns/" + nsA.Name, "/var/run/netns/" + nsB.Name}}
	e.down = func(h int) { rails[0][h].SetUp(t, false) }
	e.up = func(h int) { rails[0][h].SetUp(t, true) }
	for h := range 2 {
		e.hosts[h] = e.openHost(t, h, 2048, bufSize)
	}
	return e
}

func TestNetnsRoCEv2Fallback(t *testing.T) {
	for _, mode := range []streamMode{modeWrite, modeSend, modeRead} {
		for _, side := range []int{0, 1} {
			t.Run(fmt.Sprintf("%v/ip-link-down-host%d", mode, side), func(t *testing.T) {
				e := newNetnsEnv(t)
				a, b := e.pairs(t, 1, smallCap)
				runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 200, size: 4096, failAt: 100, failHost: side, seed: uint64(50 + side)})
				if st := a[0].SendState(); st != SendFallback {
					t.Fatalf("sender state %v, want Fallback (err %v)", st, a[0].Err())
				}
				t.Logf("fallback latency %v", a[0].FallbackLatency())
			})
		}
	}
}

// TestNetnsRoCEv2Flapping: the default rail's veth of one host goes down and up (ip link set)
// repeatedly under a stream over real RoCEv2; every message arrives once, in order, and the
// QPs come back to the default NICs after each cycle.
func TestNetnsRoCEv2Flapping(t *testing.T) {
	for _, mode := range []streamMode{modeWrite, modeSend} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newNetnsEnvWith(t, recoverOpts)
			flapUnderStreams(t, e, mode, 4)
		})
	}
}
