package provider_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/hiltest"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The end-to-end tests run the same bodies against two emulated hosts (in-process fabric)
// or, when SHIFT_HIL_DEVICES names two devices ("mlx5_0,mlx5_1", connected to each other), against
// real hardware.

var clusterSeq atomic.Uint64

type testbed struct {
	names   [2]string
	gid     uint8        // source GID index (RoCEv2); SHIFT_HIL_GID_INDEX on hardware
	cluster *emu.Cluster // nil on hardware
}

// hilTestbed names the two hardware devices of SHIFT_HIL_DEVICES, or skips. The source GID
// index is SHIFT_HIL_GID_INDEX, else the first device's preferred GID (the RoCE v2 GID of its
// port's IPv4 address; index 0 on a ConnectX is the RoCE v1 link-local GID).
func hilTestbed(t *testing.T) *testbed {
	t.Helper()
	r := hiltest.Need(t, 2)
	tb := &testbed{names: [2]string{r.Devices[0], r.Devices[1]}}
	tb.gid = uint8(r.SourceGID(t, tb.names[0]))
	return tb
}

// newTestbed builds two emulated hosts on an in-process fabric.
func newTestbed(t testing.TB) *testbed { t.Helper(); return newTestbedCfg(t, nil) }

// newTestbedKernel is newTestbed on emulated kernels offering the commands of k.
func newTestbedKernel(t testing.TB, k emu.KernelABI) *testbed {
	t.Helper()
	return newTestbedCfg(t, func(c *emu.ClusterConfig) { c.Kernel = k })
}

// newTestbedCfg is newTestbed with the cluster's configuration adjusted by adjust.
func newTestbedCfg(t testing.TB, adjust func(*emu.ClusterConfig)) *testbed {
	t.Helper()
	prefix := fmt.Sprintf("ptest%d_%d_", os.Getpid(), clusterSeq.Add(1))
	cfg := emu.ClusterConfig{Hosts: 2, Register: true, Prefix: prefix, Seed: 1}
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := emu.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	return &testbed{names: [2]string{prefix + "0", prefix + "1"}, cluster: c}
}

func (tb *testbed) needEmulator(t *testing.T, why string) {
	if tb.cluster == nil {
		t.Skipf("needs the emulated fabric (%s); skipped on hardware", why)
	}
}

// side is one end of a connected RC pair with a registered buffer.
type side struct {
	ctx *provider.Context
	pd  *provider.PD
	ch  *provider.CompChannel
	cq  *provider.CQ
	qp  *provider.QP
	buf *provider.Buffer
	mr  *provider.MR
	ep  verbs.Endpoint
}

type pairOpts struct {
	cap     verbs.QPCap
	bufSize int
	attr    verbs.ConnectAttr
}

func defaultPairOpts() pairOpts {
	return pairOpts{cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64},
		bufSize: 1 << 20}
}

func openSide(t testing.TB, name string, o pairOpts, psn uint32) *side {
	t.Helper()
	s := &side{}
	var err error
	if s.ctx, err = provider.Open(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ctx.Close() })
	if s.pd, err = as[*provider.PD](s.ctx.AllocPD()); err != nil {
		t.Fatal(err)
	}
	if s.ch, err = as[*provider.CompChannel](s.ctx.CreateCompChannel()); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = as[*provider.CQ](s.ctx.CreateCQ(verbs.CQInitAttr{CQE: 256, Channel: s.ch})); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = as[*provider.QP](s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Cap: o.cap})); err != nil {
		t.Fatal(err)
	}
	if s.buf, err = provider.NewBuffer(o.bufSize); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = as[*provider.MR](s.pd.RegMR(s.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|
		verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)); err != nil {
		t.Fatal(err)
	}
	g, err := s.ctx.GIDByIndex(o.attr.Defaults().Port, int(o.attr.GIDIndex))
	if err != nil {
		t.Fatal(err)
	}
	s.ep = verbs.Endpoint{QPN: s.qp.QPN(), PSN: psn, GID: g.GID}
	t.Cleanup(func() {
		// Destroy in the order libibverbs requires; errors here would hide the test's own.
		if s.qp.Destroy() != nil || s.mr.Dereg() != nil || s.cq.Destroy() != nil {
			t.Errorf("teardown failed")
		}
		s.ch.Close()
		s.pd.Dealloc()
		s.buf.Free()
	})
	return s
}

func connectedPair(t testing.TB, tb *testbed, o pairOpts) (*side, *side) {
	t.Helper()
	if o.attr.GIDIndex == 0 {
		o.attr.GIDIndex = tb.gid
	}
	a := openSide(t, tb.names[0], o, 0x1000)
	b := openSide(t, tb.names[1], o, 0x2000)
	if err := verbs.Connect(a.qp, o.attr, a.ep, b.ep); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(b.qp, o.attr, b.ep, a.ep); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// waitWC polls cq until n completions arrived or the guard timeout passes.
func waitWC(t testing.TB, cq *provider.CQ, n int) []verbs.WC {
	t.Helper()
	out := make([]verbs.WC, 0, n)
	var wc [16]verbs.WC
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n {
		k, err := cq.Poll(wc[:min(16, n-len(out))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wc[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("timed out with %d of %d completions: %+v", len(out), n, out)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return out
}

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

var bg = context.Background()

// waitAsync reads async events of ctx until one of type want arrives (other events, which a
// NIC may raise in between, are logged and skipped) or the guard timeout passes.
func waitAsync(t testing.TB, ctx *provider.Context, want verbs.AsyncEventType) verbs.AsyncEvent {
	t.Helper()
	guard, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	for {
		ev, err := ctx.GetAsyncEvent(guard)
		if err != nil {
			t.Fatalf("waiting for async event %d: %v", want, err)
		}
		if ev.Type == want {
			return ev
		}
		t.Logf("async event %d (%+v) while waiting for %d", ev.Type, ev, want)
	}
}
