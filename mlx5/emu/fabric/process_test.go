package fabric_test

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/shift-rdma/shift/internal/netnstest"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// echoEnv makes the test binary an echo host instead of running tests: it binds a UDPLink on
// the address in the variable, answers every packet with an ACK of the same PSN, says
// "ready" on stdout, and exits when stdin closes.
const echoEnv = "SHIFT_FABRIC_TEST_ECHO"

func echoServer(addr string) int {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l, err := fabric.ListenUDP(a)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer l.Close()
	l.SetReceiver(func(p *roce.Packet) {
		l.Send(&roce.Packet{DstIP: p.SrcIP, BTH: roce.BTH{Opcode: roce.Acknowledge, PKey: 0xffff, DestQP: p.BTH.DestQP, PSN: p.BTH.PSN},
			Has: roce.HasAETH, AETH: roce.AETH{Syndrome: roce.AETHAck | 0x1f, MSN: p.BTH.PSN}})
	})
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestUDPBetweenProcesses runs the echo host as a separate process inside its own namespace
// (ip netns exec) and exchanges RoCEv2 with it from this process in another namespace.
func TestUDPBetweenProcesses(t *testing.T) {
	nsA, nsB := netnstest.New(t), netnstest.New(t)
	va, vb := netnstest.NewVeth(t, nsA, nsB, netnstest.VethConfig{
		Addrs:           [2]netip.Prefix{netip.MustParsePrefix("10.80.0.1/24"), netip.MustParsePrefix("10.80.0.2/24")},
		StaticNeighbors: true,
	})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := nsB.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), echoEnv+"="+vb.Addr.Addr().String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("echo process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		t.Fatalf("echo process said %q: %v", line, err)
	}

	var l *fabric.UDPLink
	if err := nsA.Do(func() (err error) { l, err = fabric.ListenUDP(va.Addr.Addr()); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &sink{}
	l.SetReceiver(s.recv)
	for i := range uint32(100) {
		l.Send(data(vb.Addr.Addr(), i))
	}
	waitFor(t, "100 ACKs from the other process", func() bool { return s.len() == 100 })
	if !slices.Equal(s.psns(), seq(0, 100)) {
		t.Fatalf("ACK PSNs %v", s.psns())
	}
	if p := s.pkts[0]; p.SrcIP != vb.Addr.Addr() || p.BTH.Opcode != roce.Acknowledge {
		t.Fatalf("first answer %+v", p)
	}
}
