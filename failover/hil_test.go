package failover

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/hiltest"
	"github.com/shift-rdma/shift/mlx5/emu"
)

// The hardware-in-the-loop bodies: SHIFT on four real mlx5 ports (SHIFT_HIL_DEVICES: host
// A's default and backup, host B's default and backup, defaults cabled or switched to each
// other and backups likewise), the default port failing by a real `ip link set down` of its
// netdev. TestHILPlumbing runs the same bodies on emulated devices named the same way.

// newHILEnv is a testEnv on the rack's devices; with links each context watches its default
// netdev (probe.Watcher in this namespace) instead of waiting for the RC timeout.
func newHILEnv(t *testing.T, hook func(h int, o *Options), links bool) *testEnv {
	return newHILEnvCluster(t, hook, links, nil)
}

func TestHIL(t *testing.T) {
	hiltest.Need(t, 4)
	runHIL(t, newHILEnv)
}

// TestHILPlumbing runs the hardware bodies on an emulated cluster reached through
// SHIFT_HIL_DEVICES, its links set through the fabric instead of netlink.
func TestHILPlumbing(t *testing.T) {
	if os.Getenv("SHIFT_HIL_DEVICES") != "" {
		t.Skip("real devices configured; TestHIL covers them")
	}
	runHIL(t, func(t *testing.T, hook func(h int, o *Options), links bool) *testEnv {
		prefix := fmt.Sprintf("fohil%d_%d_", os.Getpid(), envSeq.Add(1))
		cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := cl.Close(); err != nil {
				t.Errorf("close cluster: %v", err)
			}
		})
		names := make([]string, 4)
		for i := range names {
			names[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		hiltest.Emulate(t, names, -1, func(dev string, up bool) error {
			for i, n := range names {
				if n == dev {
					cl.Endpoint(i/2, i%2, 1).SetLinkUp(up)
					return nil
				}
			}
			return fmt.Errorf("no emulated device %s", dev)
		})
		// Link events come from the fabric here (the emulated netdevs are names only).
		e := newHILEnvCluster(t, hook, links, cl)
		return e
	})
}

// newHILEnvCluster is newHILEnv; with cl (emulated devices) the contexts read link events
// from cl's fabric.
func newHILEnvCluster(t *testing.T, hook func(h int, o *Options), links bool, cl *emu.Cluster) *testEnv {
	t.Helper()
	r := hiltest.Need(t, 4)
	e := &testEnv{kv: kv.NewMem(), attr: fastAttr, job: fmt.Sprintf("hil%d_%d", os.Getpid(), envSeq.Add(1)), hook: hook,
		links: links, names: r.Devices[:4], gidIndex: r.GIDIndex, cl: cl}
	e.down = func(h int) { r.SetLink(t, r.Devices[2*h], false) }
	e.up = func(h int) { r.SetLink(t, r.Devices[2*h], true) }
	for h := range 2 {
		e.hosts[h] = e.openHost(t, h, 2048, bufSize)
	}
	return e
}

type hilEnvFunc func(t *testing.T, hook func(h int, o *Options), links bool) *testEnv

func runHIL(t *testing.T, mk hilEnvFunc) {
	for _, mode := range []streamMode{modeWrite, modeSend, modeRead} {
		for _, side := range []int{0, 1} {
			t.Run(fmt.Sprintf("Fallback/%v/link-down-host%d", mode, side), func(t *testing.T) {
				hilFallback(t, mk, mode, side, false)
			})
		}
	}
	t.Run("Fallback/write/link-watch", func(t *testing.T) { hilFallback(t, mk, modeWrite, 0, true) })
	t.Run("Flapping/write", func(t *testing.T) { hilFlapping(t, mk, modeWrite) })
	t.Run("Flapping/send", func(t *testing.T) { hilFlapping(t, mk, modeSend) })
}

// hilFallback: a stream survives the default port's link going down mid-stream, exactly once
// and in order, and the sender ends on the backup.
func hilFallback(t *testing.T, mk hilEnvFunc, mode streamMode, side int, links bool) {
	e := mk(t, nil, links)
	a, b := e.pairs(t, 1, smallCap)
	runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 200, size: 4096, failAt: 100, failHost: side, seed: uint64(70 + side)})
	if st := a[0].SendState(); st != SendFallback {
		t.Fatalf("sender state %v, want Fallback (err %v)", st, a[0].Err())
	}
	t.Logf("fallback latency %v (link watch %v)", a[0].FallbackLatency(), links)
}

// hilFlapping: the default port goes down and up four times under streams; every message
// arrives once, in order, and the QPs return to the default ports after each cycle.
func hilFlapping(t *testing.T, mk hilEnvFunc, mode streamMode) {
	flapUnderStreams(t, mk(t, recoverOpts, false), mode, 4)
}

// flapUnderStreams runs streams over one QP pair of e while host (seed % 2)'s default link
// goes down and up cycles times (e.linkDown/linkUp: the fabric, a veth or a real port);
// every message arrives once and in order, and each cycle counts a fallback and a recovery.
func flapUnderStreams(t *testing.T, e *testEnv, mode streamMode, cycles int) {
	seed := testSeed()
	t.Logf("seed %d (SHIFT_TEST_SEED reruns it)", seed)
	a, b := e.pairs(t, 1, smallCap)
	f := &flapper{e: e, qs: []*QP{a[0], b[0]}, host: int(seed % 2), cycles: cycles,
		rng: rand.New(rand.NewPCG(seed, 1)), done: make(chan struct{})}
	stop := make(chan struct{})
	go f.run(stop)
	defer func() {
		close(stop)
		<-f.done
	}()
	for guard := time.Now().Add(3 * time.Minute); ; {
		select {
		case <-f.done:
		default:
			if time.Now().After(guard) {
				t.Fatalf("flapping did not finish its %d cycles (%d done)", f.cycles, f.cycle.Load())
			}
			runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 200, size: 1024, failAt: -1, seed: seed + uint64(f.cycle.Load())})
			continue
		}
		break
	}
	if f.err != nil {
		t.Fatal(f.err)
	}
	if sa := e.hosts[0].ctx.Stats(); sa.Fallbacks < uint64(f.cycles) || sa.Recoveries < uint64(f.cycles) {
		t.Fatalf("%d cycles: %+v", f.cycles, sa)
	}
	sb := e.hosts[1].ctx.Stats()
	t.Logf("%d cycles; switch-back median %v, stall median %v; receiver: %d receive recoveries, %d waited for late backup CQEs (%d gave up)",
		f.count, percentile(f.switchBack, 0.5), percentile(f.stall, 0.5), sb.RecvRecoveries, sb.RecvLateWaits, sb.RecvLateTimeouts)
}
