package fabric_test

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/mlx5/emu/roce/rocetest"
)

// TestPcapTapDecodedByTshark captures the packets a lossy fabric delivers and has tshark
// decode the capture: every delivered packet and only those appear, well formed.
func TestPcapTapDecodedByTshark(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	f, a, b, _, sb := pair(t, fabric.WithSeed(seed))
	path := filepath.Join(t.TempDir(), "fabric.pcap")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := roce.NewPcapWriter(file)
	if err != nil {
		t.Fatal(err)
	}
	tap, tapErr := fabric.PcapTap(pw, fabric.TapDelivered)
	f.SetTap(tap)
	var sent []*roce.Packet
	for range 3 {
		for op := roce.Opcode(0); op <= roce.MaxOpcode; op++ {
			p := rocetest.RandomPacket(rng, op, netip.Addr{}, b.Addr())
			sent = append(sent, p)
		}
	}
	a.Faults(fabric.TX).DropNext(5)
	for _, p := range sent {
		a.Send(p)
	}
	waitFor(t, "delivery", func() bool { return sb.len() == len(sent)-5 })
	f.SetTap(nil)
	if err := tapErr(); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if !rocetest.HaveTshark() {
		t.Skip("tshark is not installed (Debian package tshark)")
	}
	frames := rocetest.Decode(t, path, true)
	if len(frames) != len(sent)-5 {
		t.Fatalf("tshark decoded %d frames, %d were delivered", len(frames), len(sent)-5)
	}
	for i, fr := range frames {
		p := sent[5+i]
		w, err := p.AppendWire(nil)
		if err != nil {
			t.Fatal(err)
		}
		if msg := rocetest.CheckFrame(fr, p, w); msg != "" {
			t.Errorf("seed %d: frame %d (%v): %s", seed, i+1, p.BTH.Opcode, msg)
		}
	}
}
