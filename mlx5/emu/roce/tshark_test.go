package roce_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/mlx5/emu/roce/rocetest"
)

// TestTsharkDecodesEveryOpcode writes one frame of every RC opcode, over IPv4 and IPv6, with
// random header values, to a pcap file and has tshark decode it: every header field must read
// back as written, with valid IP and UDP checksums and no malformed packet. tshark 4.0 shows
// the ICRC but does not verify it; TestICRCKnownAnswerConnectX4Lx covers its value.
func TestTsharkDecodesEveryOpcode(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	pkts := rocetest.EveryOpcode(rand.New(rand.NewPCG(seed, 7)))
	var wires [][]byte
	path := filepath.Join(t.TempDir(), "opcodes.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := roce.NewPcapWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		w, err := p.AppendWire(nil)
		if err != nil {
			t.Fatal(err)
		}
		wires = append(wires, w)
		if err := pw.WritePacket(time.Unix(1700000000, 0), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	frames := rocetest.Decode(t, path, true)
	if len(frames) != len(pkts) {
		t.Fatalf("tshark decoded %d frames, wrote %d", len(frames), len(pkts))
	}
	for i, fr := range frames {
		p := pkts[i]
		if fr.First("udp.checksum.status") != "1" || p.SrcIP.Is4() && fr.First("ip.checksum.status") != "1" {
			t.Errorf("frame %d: checksum status ip %q udp %q, want good", i+1, fr.First("ip.checksum.status"), fr.First("udp.checksum.status"))
		}
		if msg := rocetest.CheckFrame(fr, p, wires[i]); msg != "" {
			t.Errorf("seed %d: frame %d (%v over %v): %s", seed, i+1, p.BTH.Opcode, p.SrcIP, msg)
		}
	}
	// Negative control: the comparison notices a field that differs from what was sent.
	q := *pkts[0]
	q.BTH.PSN ^= 1
	if rocetest.CheckFrame(frames[0], &q, wires[0]) == "" {
		t.Fatal("CheckFrame accepted a frame whose PSN differs from the packet")
	}
}
