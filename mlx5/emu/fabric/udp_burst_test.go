package fabric_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// burstMTU is the payload of each burst packet: the largest IB MTU, as an RC stream of large
// messages sends it.
const burstMTU = 4096

// sendBurst sends n MTU-sized SEND packets with PSNs 0..n-1 from a to b as fast as the
// sender's socket takes them.
func sendBurst(a, b *fabric.UDPLink, n int) {
	payload := make([]byte, burstMTU)
	for i := range n {
		p := data(b.Addr(), uint32(i))
		p.BTH.Opcode = roce.SendMiddle
		p.Payload = payload
		a.Send(p)
	}
}

// backlogDrops sums the packets the kernel dropped from its per-CPU input backlogs
// (/proc/net/softnet_stat, second column): a loopback datagram lost there never reaches any
// socket, so no socket counter can see it. ok is false where the file cannot be read.
func backlogDrops() (total uint64, ok bool) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			return 0, false
		}
		v, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil {
			return 0, false
		}
		total += v
	}
	return total, true
}

// checkBurstAccounting waits until every one of the n packets of a burst was either received
// or counted as dropped by b, then checks that the counters tell exactly which were missed:
// the PSNs received are distinct and increasing, and as many are missing as SocketDrops and
// Stats().RxDropped report. It returns the number dropped.
func checkBurstAccounting(t *testing.T, a, b *fabric.UDPLink, s *sink, n int, backlog0 uint64) (drops uint64, kernelLoss bool) {
	t.Helper()
	if st := a.Stats(); st.TxPackets != uint64(n) || st.TxDropped != 0 {
		t.Fatalf("sender stats %+v, want %d packets sent and none dropped (send error %v)", st, n, a.SendError())
	}
	deadline := time.Now().Add(20 * time.Second) // only a guard against a hang
	settled := time.Now().Add(5 * time.Second)
	for uint64(s.len())+b.SocketDrops() < uint64(n) {
		if backlog1, _ := backlogDrops(); backlog1 != backlog0 && time.Now().After(settled) {
			// Some datagrams died in the kernel's input backlog: they will never come.
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d, socket drops %d, want %d in all", s.len(), b.SocketDrops(), n)
		}
		time.Sleep(time.Millisecond)
	}
	got := s.psns()
	drops = b.SocketDrops()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("PSN %d received after %d: duplicated or reordered on loopback", got[i], got[i-1])
		}
	}
	if missed := uint64(n - len(got)); missed != drops {
		backlog1, _ := backlogDrops()
		if missed < drops || missed-drops > backlog1-backlog0 {
			t.Fatalf("receiver missed %d of %d packets, socket drop counter says %d (kernel backlog drops meanwhile %d)", missed, n, drops, backlog1-backlog0)
		}
		t.Logf("%d packets lost in the kernel's input backlog (softnet_stat), outside any socket", missed-drops)
		kernelLoss = true
	}
	if st := b.Stats(); st.RxPackets != uint64(len(got)) || st.RxDropped != drops || st.RxBytes != uint64(len(got))*burstMTU {
		t.Fatalf("receiver stats %+v, want %d received and %d dropped", st, len(got), drops)
	}
	return drops, kernelLoss
}

// TestUDPBurstNotLost sends a burst of 4096 MTU-sized packets between two links on loopback
// with nothing pacing the sender: the enlarged receive buffer holds the whole burst while the
// receive goroutine drains it, so none is lost. Where the kernel gave a smaller buffer (no
// CAP_NET_ADMIN and a low net.core.rmem_max) losses are allowed, but each must be counted.
func TestUDPBurstNotLost(t *testing.T) {
	const n = 4096
	seed := uint64(time.Now().UnixNano())
	a, b := loopbackPair(t, rand.New(rand.NewPCG(seed, 6)))
	s := &sink{}
	b.SetReceiver(s.recv)
	rcv, snd, err := b.SocketBuffers()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("socket buffers: receive %d, send %d bytes", rcv, snd)
	backlog0, ok := backlogDrops()
	if !ok {
		t.Skip("no /proc/net/softnet_stat: cannot tell kernel backlog losses from the link's")
	}
	sendBurst(a, b, n)
	drops, kernelLoss := checkBurstAccounting(t, a, b, s, n, backlog0)
	// Each 4 KiB datagram is charged about 8 KiB of receive buffer on loopback (skb
	// truesize), so this much holds the whole burst even if the receiver never ran. The link
	// must get it wherever it may: as root (SO_RCVBUFFORCE) or under a high rmem_max.
	const need = n * 12 << 10
	if !mayForceBuffers() {
		t.Logf("no root and a low net.core.rmem_max: buffer %d bytes, %d dropped, all counted", rcv, drops)
		return
	}
	if rcv < need {
		t.Fatalf("receive buffer %d bytes, want at least %d to hold a %d-packet burst", rcv, need, n)
	}
	if drops != 0 {
		t.Fatalf("%d of %d packets dropped with a %d-byte receive buffer", drops, n, rcv)
	}
	if kernelLoss {
		t.Logf("losses in the kernel backlog, outside the link, are not the link's to prevent")
	}
}

// mayForceBuffers reports whether the link can have a large receive buffer here: as root it
// forces one past the sysctl cap, otherwise it gets at most net.core.rmem_max.
func mayForceBuffers() bool {
	if os.Geteuid() == 0 {
		return true
	}
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		return false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && v >= 32<<20
}
