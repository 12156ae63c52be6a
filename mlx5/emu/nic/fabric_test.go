package nic

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// fabricLink lets a port follow a fabric endpoint's link state.
type fabricLink struct{ *fabric.Endpoint }

func (l fabricLink) OnLinkState(fn func(bool)) { l.Watch(func(e fabric.LinkEvent) { fn(e.Up) }) }

func newFabricEnv(t testing.TB, seed uint64) (*env, *fabric.Fabric, *fabric.Endpoint, *fabric.Endpoint) {
	t.Helper()
	f := fabric.New(fabric.WithSeed(seed))
	ea, err := f.Attach(addrA)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := f.Attach(addrB)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvLinks(t, fabricLink{ea}, fabricLink{eb}, func() { _ = f.Close() })
	return e, f, ea, eb
}

// drained returns once dst's receiver has returned from every packet the fabric queued for
// it before the call. A marker sent from a new endpoint joins the back of dst's delivery
// queue, and its single delivery goroutine reaches the marker only after the packets ahead of
// it; the marker itself goes to a QPN no QP has, which the device ignores.
func drained(t *testing.T, f *fabric.Fabric, dst netip.Addr) {
	t.Helper()
	src := netip.MustParseAddr("10.0.0.250")
	ep, err := f.Attach(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	seen := make(chan struct{})
	var once sync.Once
	f.SetTap(func(_ time.Time, where fabric.TapPoint, p *roce.Packet) {
		if where == fabric.TapDelivered && p.SrcIP == src {
			once.Do(func() { close(seen) })
		}
	})
	defer f.SetTap(nil)
	ep.Send(&roce.Packet{DstIP: dst, SrcPort: 49152, BTH: roce.BTH{Opcode: roce.SendOnly, PKey: 0xffff, DestQP: 0xfffffe}})
	select {
	case <-seen:
	case <-time.After(waitFor): // failure guard only
		t.Fatalf("the marker to %v was not delivered", dst)
	}
}

// The link of the requester goes down in the middle of a 1 MiB WRITE (1024 packets at MTU
// 1024): the port reports DOWN, the responder holds a strict prefix of the data, the WRITE
// completes with RETRY_EXC_ERR after the retries, the WQE behind it is flushed and the QP is in
// ERR — with no asynchronous event, since the error CQE reports it.
func TestLinkDownMidWrite(t *testing.T) {
	const seed = 7
	e, f, ea, _ := newFabricEnv(t, seed)
	a := e.a.newQP(e.a.newCQ(64), e.a.newCQ(64))
	b := e.b.newQP(e.b.newCQ(64), e.b.newCQ(64))
	attrA, attrB := attrsFor(a, b), attrsFor(b, a)
	attrA.Timeout, attrA.RetryCnt = 8, 2 // 1 ms per try, 3 tries
	for _, st := range []QPState{QPSInit, QPSRTR, QPSRTS} {
		if err := a.qp.Modify(st, attrA); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.Modify(st, attrB); err != nil {
			t.Fatal(err)
		}
	}
	const n = 1 << 20
	fill(a.mem[:n], 11)
	cut := make(chan struct{})
	sent := 0
	ea.Faults(fabric.TX).SetFilter(func(p *roce.Packet) bool {
		if p.BTH.Opcode == roce.WriteMiddle {
			sent++
			if sent == 300 {
				close(cut)
			}
		}
		return sent >= 300
	})
	first := a.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, n)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	second := a.build(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, 64)}, raddr: b.va(0), rkey: b.mr.RKey, signaled: true})
	_ = first
	a.bf.Ring(a.sq, a.db, 2, second, false)
	select {
	case <-cut:
	case <-time.After(waitFor):
		t.Fatal("the WRITE never reached packet 300")
	}
	ea.SetLinkUp(false)
	select {
	case up := <-e.a.portEvents:
		if up {
			t.Fatal("port reported up")
		}
	case <-time.After(waitFor):
		t.Fatal("no port event")
	}
	if e.a.dev.Port(1).Active() {
		t.Fatal("port still active")
	}

	ce := a.scq.poll()
	wc := checkCQE(t, ce, mlx5.CQEReqErr, mlx5.WCRetryExcErr)
	if wc.WQECounter != first.WQEIndex || ce.Syndrome != mlx5.SyndromeTransportRetryExc || ce.VendorSyndrome != 0x81 {
		t.Fatalf("retry error CQE wqe %d syndrome %#x vendor %#x", wc.WQECounter, ce.Syndrome, ce.VendorSyndrome)
	}
	wc = checkCQE(t, a.scq.poll(), mlx5.CQEReqErr, mlx5.WCWRFlushErr)
	if wc.WQECounter != second.WQEIndex {
		t.Fatalf("flush CQE for wqe %d, want %d", wc.WQECounter, second.WQEIndex)
	}
	expectQPError(t, a, mlx5.WCRetryExcErr)
	noEvent(t, a)
	if a.qp.State() != QPSErr {
		t.Fatalf("requester state %v", a.qp.State())
	}
	// A strict prefix landed: the first k bytes match, the rest is untouched. The requester
	// gives up after 3 ms, while packets sent before the cut may still wait in the
	// responder's delivery queue on a loaded machine: read its memory once they are handled.
	drained(t, f, addrB)
	k := 0
	for k < n && b.mem[k] == a.mem[k] {
		k++
	}
	if k == 0 || k >= n || !bytes.Equal(b.mem[k:n], make([]byte, n-k)) {
		t.Fatalf("responder holds %d matching bytes then non-zero data; want a strict prefix (seed %d)", k, seed)
	}
	t.Logf("responder holds the first %d of %d bytes", k, n)
	ea.SetLinkUp(true)
	select {
	case up := <-e.a.portEvents:
		if !up {
			t.Fatal("port reported down on link up")
		}
	case <-time.After(waitFor):
		t.Fatal("no port-up event")
	}
}
