package fabric_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/mlx5/emu/roce/rocetest"
)

// hosts is two emulated hosts in their own network namespaces joined by a veth pair, each
// with a UDPLink on its veth address.
type hosts struct {
	va, vb *netnstest.Veth
	a, b   *fabric.UDPLink
	sa, sb *sink
}

func newHosts(t *testing.T, addrA, addrB string) *hosts {
	t.Helper()
	nsA, nsB := netnstest.New(t), netnstest.New(t)
	va, vb := netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{
		Addrs:           [2]netip.Prefix{netip.MustParsePrefix(addrA), netip.MustParsePrefix(addrB)},
		StaticNeighbors: true,
	})
	h := &hosts{va: va, vb: vb, sa: &sink{}, sb: &sink{}}
	listen := func(ns *netnstest.NS, addr netip.Addr) *fabric.UDPLink {
		var l *fabric.UDPLink
		if err := ns.Do(func() (err error) { l, err = fabric.ListenUDP(addr); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	h.a = listen(nsA, va.Addr.Addr())
	h.b = listen(nsB, vb.Addr.Addr())
	h.a.SetReceiver(h.sa.recv)
	h.b.SetReceiver(h.sb.recv)
	return h
}

// exchange sends n packets each way with PSNs first.. and waits until all have arrived, in
// order.
func (h *hosts) exchange(t *testing.T, first uint32, n int) {
	t.Helper()
	for i := range uint32(n) {
		h.a.Send(data(h.b.Addr(), first+i))
		h.b.Send(ack(h.a.Addr(), first+i))
	}
	want := seq(first, first+uint32(n))
	inRange := func(s *sink) []uint32 {
		var out []uint32
		for _, p := range s.psns() {
			if p >= first && p < first+uint32(n) {
				out = append(out, p)
			}
		}
		return out
	}
	waitFor(t, "traffic both ways", func() bool {
		return len(inRange(h.sa)) == n && len(inRange(h.sb)) == n
	})
	if !slices.Equal(inRange(h.sa), want) || !slices.Equal(inRange(h.sb), want) {
		t.Fatalf("PSNs %d.. arrived out of order or twice", first)
	}
}

// resync sends marker packets both ways until one arrives each way: after a link comes
// back up, the kernel needs a moment to reactivate the device's queue.
func (h *hosts) resync(t *testing.T, psn uint32) {
	t.Helper()
	waitFor(t, "the link to carry traffic again", func() bool {
		h.a.Send(data(h.b.Addr(), psn))
		h.b.Send(ack(h.a.Addr(), psn))
		return slices.Contains(h.sb.psns(), psn) && slices.Contains(h.sa.psns(), psn)
	})
}

func noneIn(got []uint32, lo, hi uint32) bool {
	for _, p := range got {
		if p >= lo && p < hi {
			return false
		}
	}
	return true
}

// TestUDPOverVethLinkDown runs RoCEv2 between two namespaces over a veth pair and takes each
// end down with `ip link set dev X down`: both links report the port down and then up again,
// nothing crosses while it is down, in either direction, and traffic resumes after `up`. Every frame on the wire is captured; each must
// carry a valid ICRC over the headers the kernel actually wrote, and tshark must decode them
// all as InfiniBand with no malformed packet.
func TestUDPOverVethLinkDown(t *testing.T) {
	h := newHosts(t, "10.79.0.1/24", "10.79.0.2/24")
	capture := netnstest.StartCapture(t, h.vb)
	var evMu sync.Mutex
	var evA, evB []bool
	h.a.OnLinkState(func(up bool) { evMu.Lock(); evA = append(evA, up); evMu.Unlock() })
	cancel := h.b.Watch(func(e fabric.LinkEvent) { evMu.Lock(); evB = append(evB, e.Up); evMu.Unlock() })
	defer cancel()
	// Both ports follow either end of the cable: admin down on one side is carrier loss on
	// the other.
	linkStates := func(what string, up bool, n int) {
		t.Helper()
		waitFor(t, what, func() bool {
			evMu.Lock()
			defer evMu.Unlock()
			return h.a.LinkUp() == up && h.b.LinkUp() == up && len(evA) == n && len(evB) == n
		})
	}
	if !h.a.LinkUp() || !h.b.LinkUp() {
		t.Fatal("links not up at start")
	}

	h.exchange(t, 0, 50)

	// Sender side down: its sends fail at once (no route), the peer's are lost on the wire.
	txDropped := h.a.Stats().TxDropped
	h.va.SetUp(t, false)
	linkStates("both ports down after va down", false, 1)
	for i := range uint32(20) {
		h.a.Send(data(h.b.Addr(), 1000+i))
		h.b.Send(ack(h.a.Addr(), 1000+i))
	}
	if got := h.a.Stats().TxDropped - txDropped; got != 20 {
		t.Fatalf("%d of 20 sends on a down link failed (last error %v)", got, h.a.SendError())
	}
	t.Logf("send on a down link: %v", h.a.SendError())
	if !errors.Is(h.a.SendError(), syscall.ENETUNREACH) && !errors.Is(h.a.SendError(), syscall.ENETDOWN) {
		t.Errorf("send on a down link failed with %v, want ENETUNREACH or ENETDOWN", h.a.SendError())
	}
	h.va.SetUp(t, true)
	linkStates("both ports up after va up", true, 2)
	h.resync(t, 2000)
	if !noneIn(h.sa.psns(), 1000, 1020) || !noneIn(h.sb.psns(), 1000, 1020) {
		t.Fatal("packets sent while the link was down arrived after it came back")
	}
	h.exchange(t, 3000, 50)

	// Receiver side down: the peer's sends succeed locally and are lost on the wire.
	h.vb.SetUp(t, false)
	linkStates("both ports down after vb down", false, 3)
	for i := range uint32(20) {
		h.a.Send(data(h.b.Addr(), 4000+i))
	}
	h.vb.SetUp(t, true)
	linkStates("both ports up after vb up", true, 4)
	h.resync(t, 5000)
	if !noneIn(h.sb.psns(), 4000, 4020) {
		t.Fatal("packets sent toward a down link arrived")
	}
	h.exchange(t, 6000, 50)
	if h.a.ICRCErrors() != 0 || h.b.ICRCErrors() != 0 {
		t.Fatalf("ICRC errors: %d, %d", h.a.ICRCErrors(), h.b.ICRCErrors())
	}
	evMu.Lock()
	if want := []bool{false, true, false, true}; !slices.Equal(evA, want) || !slices.Equal(evB, want) {
		t.Errorf("link events a %v b %v, want %v", evA, evB, want)
	}
	evMu.Unlock()

	frames, err := capture.Stop()
	if err != nil {
		t.Fatal(err)
	}
	checkCapture(t, frames, 300)
}

// TestUDPOverVethIPv6 runs RoCEv2 over IPv6 between two namespaces. The kernel sets flow
// labels of its own choosing, which the ICRC must mask; captured frames are checked as for
// IPv4. (The link is not taken down: IPv6 addresses are removed on down.)
func TestUDPOverVethIPv6(t *testing.T) {
	h := newHosts(t, "fd00:79::1/64", "fd00:79::2/64")
	capture := netnstest.StartCapture(t, h.vb)
	h.exchange(t, 0, 100)
	if h.a.ICRCErrors() != 0 || h.b.ICRCErrors() != 0 {
		t.Fatalf("ICRC errors: %d, %d", h.a.ICRCErrors(), h.b.ICRCErrors())
	}
	frames, err := capture.Stop()
	if err != nil {
		t.Fatal(err)
	}
	labelled := 0
	for _, fr := range frames {
		d := fr.Data
		if len(d) > 18 && d[12] == 0x86 && d[13] == 0xdd && (d[15]&0x0f != 0 || d[16] != 0 || d[17] != 0) {
			labelled++
		}
	}
	t.Logf("%d of %d captured frames carry a non-zero flow label", labelled, len(frames))
	checkCapture(t, frames, 200)
}

// checkCapture verifies every RoCEv2 frame of a capture with roce.ParseFrame (ICRC over the
// kernel's own IP and UDP headers) and with tshark. The sender's UDP checksums are left to
// checksum offload on veth, so the capture holds partial ones and tshark does not check them.
func checkCapture(t *testing.T, frames []netnstest.Frame, atLeast int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "veth.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := roce.NewPcapWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	var pkts []*roce.Packet
	var wires [][]byte
	for _, fr := range frames {
		p := new(roce.Packet)
		if err := roce.ParseFrame(fr.Data, p); err != nil {
			if errors.Is(err, roce.ErrFrame) {
				continue // ARP, IPv6 router solicitations and the like
			}
			t.Fatalf("captured frame % x: %v", fr.Data, err)
		}
		// The UDP payload is the frame's tail: what the kernel put on the wire.
		w, err := p.AppendWire(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(fr.Data[len(fr.Data)-len(w):]) != string(w) {
			t.Fatalf("captured payload differs from the re-encoded packet %+v", p)
		}
		pkts, wires = append(pkts, p), append(wires, w)
		if err := pw.WriteFrame(fr.Time, fr.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if len(pkts) < atLeast {
		t.Fatalf("captured only %d RoCEv2 frames", len(pkts))
	}
	t.Logf("captured %d RoCEv2 frames, ICRC valid on all", len(pkts))
	if !rocetest.HaveTshark() {
		t.Log("tshark is not installed (Debian package tshark): captured frames not cross-checked with it")
		return
	}
	decoded := rocetest.Decode(t, path, false)
	if len(decoded) != len(pkts) {
		t.Fatalf("tshark decoded %d frames of %d", len(decoded), len(pkts))
	}
	for i, fr := range decoded {
		if msg := rocetest.CheckFrame(fr, pkts[i], wires[i]); msg != "" {
			t.Errorf("captured frame %d (%v): %s", i+1, pkts[i].BTH.Opcode, msg)
		}
	}
}
