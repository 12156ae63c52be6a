package fence_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The fixture: two emulated hosts on one in-process fabric, each with two NICs. Host 0 sends,
// host 1 receives. Path 0 (the default NIC) connects NIC 0 of both hosts, path 1 (the backup)
// NIC 1; each host registers one buffer on both of its NICs, so both paths write the same
// receiver memory, as SHIFT's default and backup QPs do.

const (
	pathDefault = 0 // the fence's new QP
	pathBackup  = 1 // the fence's old QP
	bufSize     = 1 << 20
)

var clusterSeq atomic.Uint64

// nicSide is one host's objects on one NIC.
type nicSide struct {
	dev *emu.Device
	ctx *provider.Context
	pd  *provider.PD
	cq  *provider.CQ
	qp  *provider.QP
	mr  *provider.MR
	ep  verbs.Endpoint
	// gidIdx is the source GID index of ep's GID.
	gidIdx uint8
}

type bed struct {
	cluster    *emu.Cluster // nil on hardware
	gidIndex   int          // source GID index; -1: each device's preferred GID
	snd, rcv   [2]*nicSide  // per path
	sbuf, rbuf *provider.Buffer
	attr       verbs.ConnectAttr
	psn        uint32
}

// newBed builds the two hosts and connects both paths.
func newBed(t testing.TB) *bed {
	t.Helper()
	prefix := fmt.Sprintf("fence%d_%d_", os.Getpid(), clusterSeq.Add(1))
	c, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	devs := func(h, p int) (string, *emu.Device) {
		return fmt.Sprintf("%s%d", prefix, h*2+p), c.Hosts[h].Devices[p]
	}
	return newBedOn(t, c, devs, 0)
}

// newBedOn builds the bed on the devices devs names (host h's NIC p, with its emulated
// device or nil on hardware).
func newBedOn(t testing.TB, c *emu.Cluster, devs func(h, p int) (string, *emu.Device), gidIndex int) *bed {
	t.Helper()
	var err error
	b := &bed{cluster: c, psn: 0x100, gidIndex: gidIndex}
	// A short ACK timeout (4.096 µs × 2^10 ≈ 4 ms) so a dead path fails within a test's time.
	b.attr = verbs.ConnectAttr{Timeout: 10, RetryCnt: 3}
	for _, buf := range []**provider.Buffer{&b.sbuf, &b.rbuf} {
		if *buf, err = provider.NewBuffer(bufSize); err != nil {
			t.Fatal(err)
		}
		m := *buf
		t.Cleanup(func() { m.Free() })
	}
	for p := range 2 {
		sn, sd := devs(0, p)
		rn, rd := devs(1, p)
		b.snd[p] = openNIC(t, sd, sn, b.sbuf)
		b.rcv[p] = openNIC(t, rd, rn, b.rbuf)
		b.connect(t, p)
	}
	return b
}

func openNIC(t testing.TB, dev *emu.Device, name string, buf *provider.Buffer) *nicSide {
	t.Helper()
	s := &nicSide{dev: dev}
	var err error
	if s.ctx, err = provider.Open(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ctx.Close() })
	if s.pd, err = as[*provider.PD](s.ctx.AllocPD()); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = as[*provider.CQ](s.ctx.CreateCQ(verbs.CQInitAttr{CQE: 1024})); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = as[*provider.QP](s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = as[*provider.MR](s.pd.RegMR(buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|
		verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Destroy in the order libibverbs requires; errors here would hide the test's own.
		if s.qp.Destroy() != nil || s.mr.Dereg() != nil || s.cq.Destroy() != nil || s.pd.Dealloc() != nil {
			t.Errorf("teardown of %s failed", s.ctx.Name())
		}
	})
	return s
}

// connect (re)connects path p with fresh PSNs, resetting both QPs first.
func (b *bed) connect(t testing.TB, p int) {
	t.Helper()
	s, r := b.snd[p], b.rcv[p]
	for _, n := range []*nicSide{s, r} {
		if n.qp.State() != verbs.QPStateReset {
			if err := n.qp.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		g, err := n.ctx.SourceGID(1, b.gidIndex)
		if err != nil {
			t.Fatal(err)
		}
		b.psn += 0x1000
		n.ep = verbs.Endpoint{QPN: n.qp.QPN(), PSN: b.psn, GID: g.GID}
		n.gidIdx = uint8(g.Index)
	}
	as, ar := b.attr, b.attr
	as.GIDIndex, ar.GIDIndex = s.gidIdx, r.gidIdx
	if err := verbs.Connect(s.qp, as, s.ep, r.ep); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(r.qp, ar, r.ep, s.ep); err != nil {
		t.Fatal(err)
	}
}

// link returns the fabric endpoint of the sender's port on path p.
func (b *bed) link(p int) *fabric.Endpoint { return b.cluster.Endpoint(0, p, 1) }

// write is an RDMA WRITE of n bytes at off of the sender buffer to the same offset of the
// receiver buffer over path p.
func (b *bed) write(p int, wrid uint64, off, n int, flags verbs.SendFlags) verbs.SendWR {
	return verbs.SendWR{WRID: wrid, Opcode: verbs.WRRDMAWrite, Flags: flags,
		SGL:        []verbs.SGE{b.snd[p].mr.SGE(off, n)},
		RemoteAddr: b.rcv[p].mr.Addr() + uint64(off), RKey: b.rcv[p].mr.RKey()}
}

// writeImm is the notification: a WRITE_WITH_IMM of 8 bytes at off over path p.
func (b *bed) writeImm(p int, wrid uint64, off int, imm uint32) verbs.SendWR {
	w := b.write(p, wrid, off, 8, verbs.SendSignaled)
	w.Opcode, w.Imm = verbs.WRRDMAWriteWithImm, imm
	return w
}

// postRecvs posts n 8-byte receives on the receiver's QP of path p (WRITE_WITH_IMM consumes
// one).
func (b *bed) postRecvs(t testing.TB, p, n int) {
	t.Helper()
	for i := range n {
		if err := b.rcv[p].qp.PostRecv([]verbs.RecvWR{{WRID: uint64(0x9000 + i),
			SGL: []verbs.SGE{b.rcv[p].mr.SGE(bufSize-64, 8)}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// poll returns the completions now in cq (at most len(buf)).
func poll(t testing.TB, cq *provider.CQ, buf []verbs.WC) []verbs.WC {
	t.Helper()
	n, err := cq.Poll(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// waitWCs polls cq until n completions arrived; the timeout is a failure guard only.
func waitWCs(t testing.TB, cq *provider.CQ, n int) []verbs.WC {
	t.Helper()
	out := make([]verbs.WC, 0, n)
	var buf [32]verbs.WC
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		got := poll(t, cq, buf[:min(len(buf), n-len(out))])
		out = append(out, got...)
		if len(got) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("timed out with %d of %d completions: %+v", len(out), n, out)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return out
}

// waitPasses waits until the NIC's doorbell watcher has made at least n more polling passes
// (each pass reads every doorbell register once).
func waitPasses(t testing.TB, s *nicSide, n uint64) {
	t.Helper()
	start := s.dev.NIC().Stats().Passes
	deadline := time.Now().Add(30 * time.Second)
	for s.dev.NIC().Stats().Passes-start < n {
		if time.Now().After(deadline) {
			t.Fatalf("watcher of %s made %d of %d passes", s.ctx.Name(), s.dev.NIC().Stats().Passes-start, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// as converts the interface a verbs constructor returns to the implementation's type.
func as[T any](v any, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}
