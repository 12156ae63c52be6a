package failover

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/netnstest"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/probe"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The tests run two emulated hosts with two NICs each on one in-process fabric: NIC 0 is the
// default device, NIC 1 the backup. Failures are injected with the fabric's link hooks.

var envSeq atomic.Uint64

type testHost struct {
	ctx *Context
	pd  *PD
	cq  *CQ
	// scq, when set, is the send CQ of the QPs createPair makes (cq their receive CQ).
	scq *CQ
	buf *provider.Buffer
	mr  *MR
	gid [16]byte
	// gidIdx is the index of gid, the source GID index of the host's QPs.
	gidIdx uint8
}

type testEnv struct {
	prefix, job string
	hook        func(h int, o *Options)
	links       bool                  // contexts read their default NIC's link events
	linkNS      [2]string             // namespaces of the hosts' netdevs (netns tier)
	down        func(h int)           // overrides linkDown (real veth in namespaces)
	up          func(h int)           // overrides linkUp
	rails       [2][2]*netnstest.Veth // [nic][host], netns tier
	cl          *emu.Cluster
	bkNICs      []*nic.Device // the hosts' first backup NICs where cl is nil (netns tier)
	kv          *kv.Mem
	hosts       [2]*testHost
	attr        verbs.ConnectAttr
	// names are the devices on hardware (host A default, backup, host B default, backup);
	// empty: the emulated <prefix><n>.
	names []string
	// gidIndex is the GID index on hardware; -1 (or on the emulator) the preferred GID.
	gidIndex int
	// nics is the number of NICs per emulated host (0: 2): NIC 0 the default device, the
	// others its backups in order.
	nics int
}

const bufSize = 4 << 20

// Fast failure detection, as the brief asks (timeout exponent ~10, few retries), but with
// enough margin that a loaded machine does not exhaust the retries of a healthy path.
var fastAttr = verbs.ConnectAttr{Timeout: 12, RetryCnt: 3, RNRRetry: 7, MinRNRTimer: 1}

func newEnv(t testing.TB, cqe int) *testEnv { return newEnvWith(t, cqe, nil) }

// newEnvWith is newEnv with a hook that adjusts each host's Options.
func newEnvWith(t testing.TB, cqe int, hook func(h int, o *Options)) *testEnv {
	t.Helper()
	return newEnvCfg(t, cqe, hook, false)
}

// newEnvCfg is newEnvWith; with links, each context reads its default NIC's link events
// from the emulated fabric (Options.LinkEvents).
func newEnvCfg(t testing.TB, cqe int, hook func(h int, o *Options), links bool) *testEnv {
	t.Helper()
	return newEnvNICs(t, cqe, hook, links, 2)
}

// newEnvNICs is newEnvCfg with nics NICs per host: each context's backups are NICs 1..nics-1.
func newEnvNICs(t testing.TB, cqe int, hook func(h int, o *Options), links bool, nics int) *testEnv {
	t.Helper()
	prefix := fmt.Sprintf("fo%d_%d_", os.Getpid(), envSeq.Add(1))
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: nics, Register: true, Prefix: prefix, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	e := &testEnv{cl: cl, kv: kv.NewMem(), attr: fastAttr, prefix: prefix, job: fmt.Sprintf("job%d", envSeq.Load()), hook: hook, links: links, nics: nics}
	for h := range 2 {
		e.hosts[h] = e.openHost(t, h, cqe, bufSize)
	}
	return e
}

// pairs creates n connected QP pairs between the two hosts and waits for their shadows.
func (e *testEnv) pairs(t testing.TB, n int, cp verbs.QPCap) (a, b []*QP) {
	t.Helper()
	for i := range n {
		qa, qb := e.connect(t, e.hosts[0], e.hosts[1], cp, uint32(0x100+i))
		a, b = append(a, qa), append(b, qb)
	}
	e.waitShadows(t)
	return a, b
}

// waitShadows waits until both hosts' shadow verbs have run.
func (e *testEnv) waitShadows(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, h := range e.hosts {
		if err := h.ctx.WaitShadow(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// linkDown takes the default NIC of host h off the fabric.
func (e *testEnv) linkDown(h int) {
	if e.down != nil {
		e.down(h)
		return
	}
	e.cl.Endpoint(h, 0, 1).SetLinkUp(false)
}

// payload fills b with the bytes of message seq (its sequence number first).
func payload(b []byte, seed, seq uint64) {
	r := rand.New(rand.NewPCG(seed, seq))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, seq)
	}
}

// pollHosts polls each host's CQ once and appends what it holds to got[h].
func (e *testEnv) pollHosts(t testing.TB, got *[2][]verbs.WC) {
	t.Helper()
	var w [8]verbs.WC
	for h, hs := range e.hosts[:2] {
		n, err := hs.cq.Poll(w[:])
		if err != nil {
			t.Fatal(err)
		}
		got[h] = append(got[h], w[:n]...)
	}
}

// poller collects completions of a CQ, failing the test on a guard timeout.
type poller struct {
	t   testing.TB
	cq  *CQ
	wcs [32]verbs.WC
}

func (p *poller) next(deadline time.Time) []verbs.WC {
	for {
		n, err := p.cq.Poll(p.wcs[:])
		if err != nil {
			p.t.Errorf("poll: %v", err)
			return nil
		}
		if n > 0 {
			return p.wcs[:n]
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// openHost opens a failover context on host h's default NIC (backup: its NIC 1) with a PD,
// a CQ and one registered buffer.
func (e *testEnv) openHost(t testing.TB, h, cqe, size int) *testHost {
	t.Helper()
	nics := max(e.nics, 2)
	def := e.device(nics * h)
	var bks []string
	for n := 1; n < nics; n++ {
		bks = append(bks, e.device(nics*h+n))
	}
	o := Options{Backups: bks, KV: e.kv, Job: e.job, GIDIndex: e.gidIndex,
		DrainTimeout: 20 * time.Second, HandshakeTimeout: 20 * time.Second}
	if e.hook != nil {
		e.hook(h, &o)
	}
	if e.links && e.cl == nil {
		o.WatchLink, o.LinkNetNS = true, e.linkNS[h]
	}
	if e.links && e.cl != nil {
		ch := make(chan probe.LinkEvent, 1024)
		cancel := e.cl.Endpoint(h, 0, 1).Watch(func(ev fabric.LinkEvent) {
			select {
			case ch <- probe.LinkEvent{Netdev: def, Up: ev.Up, Time: time.Now()}:
			default: // a test that floods the link: the context has the later events
			}
		})
		t.Cleanup(cancel)
		o.LinkEvents = ch
	}
	c, err := Open(def, o)
	if err != nil {
		t.Fatal(err)
	}
	th := &testHost{ctx: c}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close context: %v", err)
		}
		if th.buf != nil {
			th.buf.Free()
		}
	})
	if th.pd, err = as[*PD](c.AllocPD()); err != nil {
		t.Fatal(err)
	}
	if th.cq, err = as[*CQ](c.CreateCQ(verbs.CQInitAttr{CQE: cqe})); err != nil {
		t.Fatal(err)
	}
	if th.buf, err = provider.NewBuffer(size); err != nil {
		t.Fatal(err)
	}
	if th.mr, err = as[*MR](th.pd.RegMR(th.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)); err != nil {
		t.Fatal(err)
	}
	g, err := c.Default().SourceGID(1, e.gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	th.gid, th.gidIdx = g.GID, uint8(g.Index)
	return th
}

// device is the name of device n (host h's default is nics·h, its backups the next ones).
func (e *testEnv) device(n int) string {
	if e.names != nil {
		return e.names[n]
	}
	return fmt.Sprintf("%s%d", e.prefix, n)
}

// createPair creates one QP pair, not connected, between two host contexts on their CQs,
// and returns each side's connect attributes.
func (e *testEnv) createPair(t testing.TB, ha, hb *testHost, cp verbs.QPCap) (qa, qb *QP, aa, ab verbs.ConnectAttr) {
	t.Helper()
	qa, err := as[*QP](ha.pd.CreateQP(verbs.QPInitAttr{SendCQ: ha.sendCQ(), RecvCQ: ha.cq, Cap: cp}))
	if err != nil {
		t.Fatal(err)
	}
	qb, err = as[*QP](hb.pd.CreateQP(verbs.QPInitAttr{SendCQ: hb.sendCQ(), RecvCQ: hb.cq, Cap: cp}))
	if err != nil {
		t.Fatal(err)
	}
	aa, ab = e.attr, e.attr
	aa.GIDIndex, ab.GIDIndex = ha.gidIdx, hb.gidIdx
	return qa, qb, aa, ab
}

// sendCQ is the send CQ of the host's QPs: scq when set, else cq.
func (h *testHost) sendCQ() *CQ {
	if h.scq != nil {
		return h.scq
	}
	return h.cq
}

// connect creates and connects one QP pair between two host contexts.
func (e *testEnv) connect(t testing.TB, ha, hb *testHost, cp verbs.QPCap, psn uint32) (*QP, *QP) {
	t.Helper()
	qa, qb, aa, ab := e.createPair(t, ha, hb, cp)
	ea := verbs.Endpoint{QPN: qa.QPN(), PSN: psn, GID: ha.gid}
	eb := verbs.Endpoint{QPN: qb.QPN(), PSN: psn + 0x8000, GID: hb.gid}
	if err := verbs.Connect(qa, aa, ea, eb); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(qb, ab, eb, ea); err != nil {
		t.Fatal(err)
	}
	return qa, qb
}
