package fabric

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// TestUDPOverflowDropsCounted forces receive-buffer overflow (a small buffer and a receiver
// that does not return until the whole burst was sent) and checks that every datagram the
// receiver did not get is counted, by SocketDrops and in Stats().RxDropped, and that the
// link keeps receiving afterwards.
func TestUDPOverflowDropsCounted(t *testing.T) {
	const n = 400 // under the 1000-packet input backlog of the kernel: every loss is the socket's
	a, err := ListenUDP(netip.MustParseAddr("127.79.0.1"))
	if err != nil {
		t.Skipf("cannot bind a loopback address for the test (%v)", err)
	}
	defer a.Close()
	b, err := ListenUDP(netip.MustParseAddr("127.79.0.2"))
	if err != nil {
		t.Skipf("cannot bind a loopback address for the test (%v)", err)
	}
	defer b.Close()
	var serr error
	if err := b.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
	}); err != nil || serr != nil {
		t.Fatalf("shrinking the receive buffer: %v %v", err, serr)
	}
	var (
		mu   sync.Mutex
		psns []uint32
	)
	release := make(chan struct{})
	b.SetReceiver(func(p *roce.Packet) {
		<-release
		mu.Lock()
		psns = append(psns, p.BTH.PSN)
		mu.Unlock()
	})
	received := func() int { mu.Lock(); defer mu.Unlock(); return len(psns) }
	payload := make([]byte, 4096)
	for i := range n {
		a.Send(&roce.Packet{DstIP: b.Addr(), BTH: roce.BTH{Opcode: roce.SendMiddle, PKey: 0xffff, DestQP: 0x12, PSN: uint32(i)}, Payload: payload})
	}
	close(release)
	deadline := time.Now().Add(20 * time.Second) // only a guard against a hang
	for uint64(received())+b.SocketDrops() < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d, socket drops %d, want %d in all", received(), b.SocketDrops(), n)
		}
		time.Sleep(time.Millisecond)
	}
	drops := b.SocketDrops()
	if drops == 0 {
		t.Fatalf("no drops with a 64 KiB buffer and a blocked receiver: the test forced nothing")
	}
	if got := received(); uint64(n-got) != drops {
		t.Fatalf("receiver missed %d of %d, socket drops %d", n-got, n, drops)
	}
	if st := b.Stats(); st.RxDropped != drops {
		t.Fatalf("stats %+v, want RxDropped %d", st, drops)
	}
	// Still receiving after the overflow.
	a.Send(&roce.Packet{DstIP: b.Addr(), BTH: roce.BTH{Opcode: roce.SendMiddle, PKey: 0xffff, DestQP: 0x12, PSN: n}, Payload: payload})
	for received() < n-int(drops)+1 {
		if time.Now().After(deadline) {
			t.Fatalf("packet after the overflow not received")
		}
		time.Sleep(time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b.SocketDrops() != drops || b.Stats().RxDropped != drops {
		t.Fatalf("after close: socket drops %d, stats %+v, want %d", b.SocketDrops(), b.Stats(), drops)
	}
}
