package nic

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu/rc/rctest"
)

// carrierLink is an rctest endpoint with a carrier that reports its changes.
type carrierLink struct {
	*rctest.End
	mu sync.Mutex
	up bool
	fn func(bool)
}

func (l *carrierLink) LinkUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

func (l *carrierLink) OnLinkState(fn func(bool)) {
	l.mu.Lock()
	l.fn = fn
	l.mu.Unlock()
}

func (l *carrierLink) set(up bool) {
	l.mu.Lock()
	l.up = up
	fn := l.fn
	l.mu.Unlock()
	l.End.SetDown(!up)
	if fn != nil {
		fn(up)
	}
}

// A port follows its link's carrier and reports each change once.
func TestPortFollowsLink(t *testing.T) {
	p := rctest.NewPair(netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"))
	l := &carrierLink{End: p.A, up: true}
	events := make(chan [2]int, 8)
	d, err := New(Config{Name: "emlx5_port", Ports: []PortConfig{{Link: l, MTU: 2048}},
		OnPortState: func(port int, up bool) {
			v := 0
			if up {
				v = 1
			}
			events <- [2]int{port, v}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	port := d.Port(1)
	if !port.Active() || port.MTU() != 2048 || port.Addr() != netip.MustParseAddr("10.9.0.1") || d.Port(2) != nil {
		t.Fatalf("port 1: active %v mtu %d addr %v", port.Active(), port.MTU(), port.Addr())
	}
	expect := func(want [2]int) {
		t.Helper()
		select {
		case ev := <-events:
			if ev != want {
				t.Fatalf("port event %v, want %v", ev, want)
			}
		case <-time.After(waitFor):
			t.Fatalf("no port event %v", want)
		}
	}
	l.set(false)
	expect([2]int{1, 0})
	if port.Active() {
		t.Fatal("port active after carrier loss")
	}
	l.set(false) // no change, no event
	l.set(true)
	expect([2]int{1, 1})
	if !port.Active() {
		t.Fatal("port down after carrier came back")
	}
	select {
	case ev := <-events:
		t.Fatalf("unexpected port event %v", ev)
	default:
	}
}

// Creation rejects what the hardware cannot do.
func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	d := e.a.dev
	buf, db := e.alloc(1<<16), e.alloc(64)
	if _, err := d.CreateCQ(CQConfig{Buf: addrOf(buf), CQEs: 6, CQESize: 64, DBRec: addrOf(db)}); err == nil {
		t.Error("CQ of 6 entries accepted")
	}
	for _, size := range []int{32, 96, 256} {
		if _, err := d.CreateCQ(CQConfig{Buf: addrOf(buf), CQEs: 8, CQESize: size, DBRec: addrOf(db)}); err == nil {
			t.Errorf("%d-byte CQEs accepted", size)
		}
	}
	if cq, err := d.CreateCQ(CQConfig{Buf: addrOf(buf), CQEs: 8, CQESize: 128, DBRec: addrOf(db)}); err != nil {
		t.Errorf("128-byte CQEs refused: %v", err)
	} else if err := cq.Destroy(); err != nil {
		t.Error(err)
	}
	if _, err := d.CreateCQ(CQConfig{Buf: addrOf(buf) + 8, CQEs: 8, CQESize: 64, DBRec: addrOf(db)}); err == nil {
		t.Error("misaligned CQ buffer accepted")
	}
	gone, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := addrOf(gone)
	if err := unix.Munmap(gone); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RegisterMR(1, goneAddr, 8192, AccessLocalWrite); !errors.Is(err, unix.EFAULT) {
		t.Errorf("MR over unmapped memory: %v, want EFAULT", err)
	}
	if _, err := d.CreateCQ(CQConfig{Buf: goneAddr, CQEs: 8, CQESize: 64, DBRec: addrOf(db)}); !errors.Is(err, unix.EFAULT) {
		t.Errorf("CQ over unmapped memory: %v, want EFAULT", err)
	}
	if _, err := d.RegisterMR(1, addrOf(buf), 4096, AccessRemoteWrite); err == nil {
		t.Error("remote write without local write accepted")
	}
	mr, err := d.RegisterMR(1, addrOf(buf), 4096, AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if mr.LKey&0xff == 0 || mr.LKey == 0x100 {
		t.Errorf("mkey %#x has a zero key byte", mr.LKey)
	}
	if err := d.DeregisterMR(mr.LKey); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.LookupMR(mr.LKey); ok {
		t.Error("deregistered key still resolves")
	}
	if err := d.DeregisterMR(mr.LKey); err == nil {
		t.Error("double deregistration accepted")
	}
	cq := e.a.newCQ(8)
	q := e.a.newQP(cq, cq)
	if err := cq.cq.Destroy(); err == nil {
		t.Error("CQ destroyed while a QP uses it")
	}
	if err := d.FreeUAR(e.a.uar); err == nil {
		t.Error("UAR freed while a QP rings through it")
	}
	if d.QP(q.qp.QPN()) != q.qp || d.CQ(cq.cq.CQN()) != cq.cq || d.QP(0x1) != nil {
		t.Error("lookup by number")
	}
	if err := q.qp.Modify(QPSSQD, QPAttr{}); err == nil {
		t.Error("SQD accepted")
	}
	if err := q.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := cq.cq.Destroy(); err != nil {
		t.Fatalf("destroy CQ after its QP: %v", err)
	}
	if d.QP(q.qp.QPN()) != nil || d.CQ(cq.cq.CQN()) != nil {
		t.Error("destroyed objects still found")
	}
}
