package tooltest

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/toolrun"
)

// Tool is one program of the matrix and how to check its result.
type Tool struct {
	Name  string
	Args  []string // besides -d, -p and the server address
	API   []string // extra arguments selecting the post API: nil for the default
	Check func(t testing.TB, out string)
	// Passive: the server only serves the client's READs and reports nothing itself.
	Passive bool
}

// The matrix's run lengths.
const (
	PingIters = 200
	BWIters   = 500
	LatIters  = 200
	PingSize  = 4096
)

// CheckPingpong checks ibv_rc_pingpong's result of the matrix's run.
func CheckPingpong(t testing.TB, out string) {
	t.Helper()
	r, err := toolrun.ParsePingpong(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Iters != PingIters || r.Bytes != int64(2*PingSize*PingIters) || r.UsecPerIter <= 0 {
		t.Fatalf("pingpong result %+v, want %d iterations of %d bytes each way", r, PingIters, PingSize)
	}
}

// CheckBW checks a perftest bandwidth result of the matrix's run.
func CheckBW(t testing.TB, out string) {
	t.Helper()
	r, err := toolrun.ParseBW(out)
	if err != nil {
		t.Fatal(err)
	}
	// The receiving side of ib_send_bw reports no peak (0); everything else has both.
	if r.Iterations != BWIters || r.AvgMBps <= 0 || (r.PeakMBps != 0 && r.PeakMBps < r.AvgMBps) {
		t.Fatalf("bandwidth result %+v, want %d iterations and a positive bandwidth", r, BWIters)
	}
}

// CheckLat checks a perftest latency result of the matrix's run.
func CheckLat(t testing.TB, out string) {
	t.Helper()
	r, err := toolrun.ParseLat(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Iterations != LatIters || r.Typical <= 0 || r.Min > r.Typical || r.Max < r.Typical {
		t.Fatalf("latency result %+v, want %d iterations and ordered latencies", r, LatIters)
	}
}

// Matrix is every tool, with the send API variants: ibv_post_send, and the ibv_wr_* API that
// perftest uses on a ConnectX part id (the emulated device reports MT4123) and
// ibv_rc_pingpong with -N.
func Matrix() []Tool {
	ping := []string{"-g", "0", "-c", "-n", strconv.Itoa(PingIters), "-s", strconv.Itoa(PingSize)}
	bw := []string{"-n", strconv.Itoa(BWIters), "-s", "16384"}
	lat := []string{"-n", strconv.Itoa(LatIters), "-s", "64"}
	var ts []Tool
	ts = append(ts, Tool{"ibv_rc_pingpong", ping, nil, CheckPingpong, false}, Tool{"ibv_rc_pingpong", ping, []string{"-N"}, CheckPingpong, false})
	for _, p := range []string{"ib_write_bw", "ib_send_bw", "ib_read_bw"} {
		ts = append(ts, Tool{p, bw, nil, CheckBW, false}, Tool{p, bw, []string{"--use_old_post_send"}, CheckBW, false})
	}
	for _, p := range []string{"ib_write_lat", "ib_send_lat", "ib_read_lat"} {
		passive := p == "ib_read_lat"
		ts = append(ts, Tool{p, lat, nil, CheckLat, passive}, Tool{p, lat, []string{"--use_old_post_send"}, CheckLat, passive})
	}
	// The atomics (FETCH_AND_ADD, perftest's default; 8 bytes, so no -s): the responder's
	// read-modify-write and the atomic WQE's own segment, on every path the matrix runs.
	abw := []string{"-n", strconv.Itoa(BWIters)}
	alat := []string{"-n", strconv.Itoa(LatIters)}
	ts = append(ts, Tool{"ib_atomic_bw", abw, nil, CheckBW, false}, Tool{"ib_atomic_bw", abw, []string{"--use_old_post_send"}, CheckBW, false},
		Tool{"ib_atomic_lat", alat, nil, CheckLat, true}, Tool{"ib_atomic_lat", alat, []string{"--use_old_post_send"}, CheckLat, true})
	return ts
}

// MatrixPrograms names the programs Matrix runs, once each, for RequireTools.
func MatrixPrograms() []string {
	var names []string
	for _, tl := range Matrix() {
		if !slices.Contains(names, tl.Name) {
			names = append(names, tl.Name)
		}
	}
	return names
}

// EventTools are the programs of the matrix that wait on completion channels (-e):
// ibv_rc_pingpong and the bandwidth tests that support events. (perftest's -e latency loops
// take exactly one poll per event and re-arm before polling, so on a NIC whose completions
// lag the spurious event of a re-arm they overrun their one-deep send queue; they are left
// out, see docs/STATUS.md.)
func EventTools() []Tool {
	return []Tool{
		{Name: "ibv_rc_pingpong", Args: []string{"-g", "0", "-c", "-e", "-n", strconv.Itoa(PingIters), "-s", strconv.Itoa(PingSize)}, Check: CheckPingpong},
		{Name: "ib_send_bw", Args: []string{"-e", "-n", strconv.Itoa(BWIters), "-s", "16384"}, Check: CheckBW},
		{Name: "ib_read_bw", Args: []string{"-e", "-n", strconv.Itoa(BWIters), "-s", "16384"}, Check: CheckBW},
	}
}

// Label names the run: program/api.
func (tl Tool) Label() string {
	api := "wr_api"
	switch {
	case len(tl.API) == 0 && tl.Name == "ibv_rc_pingpong":
		api = "post_send"
	case len(tl.API) > 0 && tl.API[0] == "--use_old_post_send":
		api = "post_send"
	}
	return tl.Name + "/" + api
}

// RunMatrix runs every tool of tools between server device sdev on hs and client device cdev on hc.
func RunMatrix(t *testing.T, tools []Tool, hs, hc *Host, ms, mc Mode, sdev, cdev, addr string) {
	for _, tl := range tools {
		t.Run(tl.Label(), func(t *testing.T) {
			args := append(append([]string{}, tl.Args...), tl.API...)
			r := RunPair(t, hs, hc, ms, mc, tl.Name, args, Port(), sdev, cdev, addr, 60*time.Second)
			if r.ClientErr != nil || r.ServerErr != nil {
				t.Fatalf("client: %v, server: %v\n--- client:\n%s\n--- server:\n%s", r.ClientErr, r.ServerErr, r.Client, r.Server)
			}
			tl.Check(t, r.Client)
			if !tl.Passive {
				tl.Check(t, r.Server)
			}
		})
	}
}

// Port is a TCP port for one tool run (the tools' own default, 18515, may be taken), below
// Linux's ephemeral range (32768 up): a port drawn inside it was once held by another
// connection's local port, and the perftest server, unable to listen, ended
// (TestLibmlx5CQE128 in a full make test). RunPair's retries use the next two ports.
func Port() int { return 20000 + rand.IntN(12000) }

// LoopbackAddrs returns n loopback addresses of a /24 no other run is likely to use
// (127.x.y.0/24 with x, y random): each emulated NIC binds its address's UDP port 4791.
func LoopbackAddrs(n int) []netip.Addr {
	x, y := byte(100+rand.IntN(100)), byte(rand.IntN(256))
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{127, x, y, byte(i + 1)})
	}
	return out
}
