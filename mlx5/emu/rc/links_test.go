package rc

import (
	"bytes"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// linkedQPs connects two QPs over two given links with the real clock.
func linkedQPs(t *testing.T, la, lb roce.Link, timeout uint8) (a, b *QP, ha, hb *testHost) {
	t.Helper()
	ha, hb = newTestHost(), newTestHost()
	a, b = New(ha), New(hb)
	la.SetReceiver(a.HandlePacket)
	lb.SetReceiver(b.HandlePacket)
	ca := Config{
		LocalQPN: 0x101, RemoteQPN: 0x202, RemoteIP: lb.Addr(), Link: la, PathMTU: 4096,
		SQPSN: 0x123456, RQPSN: 0xfffff0, Timeout: timeout, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 1,
		MaxRDAtomic: 16, MaxDestRDAtomic: 16,
		RemoteAccess: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic, Clock: clock.Real{},
	}
	cb := ca
	cb.LocalQPN, cb.RemoteQPN, cb.RemoteIP, cb.Link = 0x202, 0x101, la.Addr(), lb
	cb.SQPSN, cb.RQPSN = 0xfffff0, 0x123456
	connect(t, a, ca)
	connect(t, b, cb)
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return a, b, ha, hb
}

// workload posts WRITEs covering 1 MiB, SENDs, READs and FETCH_ADDs from a to b and checks
// the outcome once all completed.
func workload(t *testing.T, a *QP, ha, hb *testHost) {
	t.Helper()
	const size = 1 << 20
	mem := hb.register(1, 0x100000, size+4096, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	src := pattern(size, 21)
	idx := uint16(0)
	post := func(wr WorkRequest) {
		wr.Index = idx
		idx++
		if err := a.Post(&wr); err != nil {
			t.Fatal(err)
		}
	}
	for off := 0; off < size; off += 64 << 10 {
		post(WorkRequest{Op: OpWrite, RKey: 1, RemoteAddr: 0x100000 + uint64(off), Local: [][]byte{src[off : off+64<<10]}})
	}
	var recv [][]byte
	for i := range 8 {
		d := make([]byte, 10000)
		hb.postRecv(d)
		recv = append(recv, d)
		post(WorkRequest{Op: OpSendImm, Imm: uint32(i), Local: [][]byte{src[i*1000 : i*1000+9000]}})
	}
	back := make([]byte, size)
	post(WorkRequest{Op: OpRead, RKey: 1, RemoteAddr: 0x100000, Local: [][]byte{back}})
	for range 10 {
		post(WorkRequest{Op: OpFetchAdd, RKey: 1, RemoteAddr: 0x100000 + size, SwapAdd: 3, Local: [][]byte{make([]byte, 8)}})
	}
	s := waitSends(t, ha, int(idx))
	for i, c := range s {
		if c.Status != StatusSuccess || c.Index != uint16(i) {
			t.Fatalf("completion %d: %+v (stats %+v)", i, c, a.Stats())
		}
	}
	if !bytes.Equal(mem[:size], src) || !bytes.Equal(back, src) {
		t.Fatal("WRITE or READ data mismatch")
	}
	if v := loadWord(mem, size); v != 30 {
		t.Fatalf("counter %d after 10 FETCH_ADD 3, want 30", v)
	}
	rc := hb.recvC()
	if len(rc) != 8 {
		t.Fatalf("%d receives", len(rc))
	}
	for i, c := range rc {
		if c.Status != StatusSuccess || c.Imm != uint32(i) || c.ByteLen != 9000 || !bytes.Equal(recv[i][:9000], src[i*1000:i*1000+9000]) {
			t.Fatalf("receive %d: %+v", i, c)
		}
	}
}

// The engine over the in-process fabric, with its seeded loss and reordering and the real
// clock, delivers everything intact.
func TestOverInProcessFabric(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("fabric seed %d", seed)
				}
			}()
			f := fabric.New(fabric.WithSeed(seed))
			t.Cleanup(func() { f.Close() })
			ea, err := f.Attach(netip.MustParseAddr("10.1.0.1"))
			if err != nil {
				t.Fatal(err)
			}
			eb, err := f.Attach(netip.MustParseAddr("10.1.0.2"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range []*fabric.Endpoint{ea, eb} {
				e.Faults(fabric.TX).SetLoss(0.01)
				e.Faults(fabric.TX).SetReorder(0.01, 2)
			}
			a, _, ha, hb := linkedQPs(t, ea, eb, 14) // 67 ms ACK timeout
			workload(t, a, ha, hb)
			if st := a.Stats(); st.Retransmits == 0 {
				t.Fatalf("1%% loss caused no retransmission: %+v", st)
			}
		})
	}
}

// The engine over real RoCEv2 datagrams on loopback: its packets survive the wire encoding
// (headers, pad, ICRC) in both directions.
func TestOverUDPLoopback(t *testing.T) {
	la, err := fabric.ListenUDP(netip.MustParseAddr("127.86.0.1"))
	if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("cannot bind a loopback address on UDP 4791 here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { la.Close() })
	lb, err := fabric.ListenUDP(netip.MustParseAddr("127.86.0.2"))
	if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("cannot bind a loopback address on UDP 4791 here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	a, _, ha, hb := linkedQPs(t, la, lb, 14)
	workload(t, a, ha, hb)
	if n := la.ICRCErrors() + lb.ICRCErrors(); n != 0 {
		t.Fatalf("%d ICRC errors", n)
	}
}
