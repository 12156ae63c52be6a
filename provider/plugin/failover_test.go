package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/internal/toolrun"
	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// A failure scenario on the default rail while an unmodified program runs.
type linkRun struct {
	name  string
	args  []string
	check func(t *testing.T, out string)
	// events: the program waits on completion channels (-e), which on emulated devices and
	// in SHIFT mode need the preload object (tooltest.Mode.Preload).
	events bool
}

func checkBWDuration(t *testing.T, out string) {
	t.Helper()
	r, err := toolrun.ParseBW(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Iterations <= 0 || r.AvgMBps <= 0 {
		t.Fatalf("bandwidth result %+v, want iterations and a positive bandwidth", r)
	}
}

func checkLatDuration(t *testing.T, out string) {
	t.Helper()
	r, err := toolrun.ParseLat(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Iterations <= 0 || r.Avg <= 0 {
		t.Fatalf("latency result %+v, want iterations and a positive latency", r)
	}
}

// failoverRuns are the long runs a link failure hits: ib_write_bw, ib_send_bw, ib_read_bw
// (whose QPs allow the peer RDMA READ only: failover.resetAccess), ib_send_lat and
// ib_write_lat (ping-pong: both directions fall back and come back) for six seconds,
// ib_send_bw waiting on its completion channel (-e) for 6000 messages, and ibv_rc_pingpong
// with its buffer check for 2000 round trips.
func failoverRuns() []linkRun {
	return []linkRun{
		{"ib_write_bw", []string{"-D", "6", "-s", "65536"}, checkBWDuration, false},
		{"ib_send_bw", []string{"-D", "6", "-s", "65536"}, checkBWDuration, false},
		{"ib_read_bw", []string{"-D", "6", "-s", "65536"}, checkBWDuration, false},
		{"ib_send_lat", []string{"-D", "6", "-s", "4096"}, checkLatDuration, false},
		{"ib_write_lat", []string{"-D", "6", "-s", "4096"}, checkLatDuration, false},
		// perftest takes -e only with a count of iterations (-n), not with -D.
		{"ib_send_bw", []string{"-e", "-n", "6000", "-s", "65536"}, checkBWDuration, true},
		{"ibv_rc_pingpong", []string{"-g", "0", "-c", "-n", "2000", "-s", "4096"}, func(t *testing.T, out string) {
			t.Helper()
			r, err := toolrun.ParsePingpong(out)
			if err != nil {
				t.Fatal(err)
			}
			if r.Iters != 2000 {
				t.Fatalf("pingpong ran %d iterations, want 2000", r.Iters)
			}
		}, false},
	}
}

// label names a run's subtest: the program, and -e for one that waits on events.
func (lr linkRun) label() string {
	if lr.events {
		return lr.name + "-e"
	}
	return lr.name
}

// TestFailoverUnderTools takes host A's default rail down under each long run and brings it
// back: in SHIFT mode the programs finish with exit 0 (rc_pingpong with its buffer check
// passing), traffic moves to the backup rail while the default is down and returns to the
// default rail once it is back.
func TestFailoverUnderTools(t *testing.T) {
	runs := failoverRuns()
	var programs []string
	for _, lr := range runs {
		programs = append(programs, lr.name)
	}
	p := netnsPair(t, programs...)
	for _, lr := range runs {
		t.Run(lr.label(), func(t *testing.T) {
			runClocked(t, lr.name, func() (string, error, string, error) { return failoverRun(t, p, lr) }, lr.check)
		})
	}
}

// netnsPair is the two namespaced hosts of the tests that pull a rail under unmodified
// programs (tooltest.NewNetnsPair, with the plugin built); it skips where programs are
// missing.
func netnsPair(t *testing.T, programs ...string) *tooltest.NetnsPair {
	t.Helper()
	tooltest.RequireTools(t, programs...)
	return tooltest.NewNetnsPair(t, tooltest.BuildPlugin(t), emusysfs.Shift)
}

// runClocked runs run (one run of program, returning the client's and the server's output
// and how each ended) again when perftest could not measure its CPU clock, at most three
// times: its data path ran through, and only its timing failed on this busy machine
// (tooltest.RunPair does the same). It fails the test if either program failed, and checks
// the client's output.
func runClocked(t *testing.T, program string, run func() (cout string, cerr error, sout string, serr error), check func(*testing.T, string)) {
	t.Helper()
	for try := 0; ; try++ {
		cout, cerr, sout, serr := run()
		if try < 2 && tooltest.PerftestClockFailed(cerr, serr) {
			t.Logf("%s could not measure its CPU clock on this busy machine; running it again", program)
			continue
		}
		if cerr != nil || serr != nil {
			t.Fatalf("client: %v, server: %v\n--- client:\n%s\n--- server:\n%s", cerr, serr, cout, sout)
		}
		check(t, cout)
		return
	}
}

// failoverRun is one run of TestFailoverUnderTools: the rail goes down under the program
// and comes back; it returns both programs' outputs and errors.
func failoverRun(t *testing.T, p *tooltest.NetnsPair, lr linkRun) (cout string, cerr error, sout string, serr error) {
	t.Helper()
	def, bk := p.Rails[0][0], p.Rails[1][0] // host A's ends
	// The status files (and the default KV store) go to a runtime directory of the
	// test's own, where this test reads them as shiftctl status does.
	xdg := t.TempDir()
	m := tooltest.Mode{Shift: "s0:s1", Job: fmt.Sprintf("fail-%d", port()), Extra: []string{"SHIFT_DEBUG=1", "XDG_RUNTIME_DIR=" + xdg}, Preload: lr.events}
	srv, cli := p.StartPair(t, m, lr.name, lr.args...)
	d0, err := p.Traffic(0, def.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitTraffic(0, def.Name, d0, 1<<20, cli, 20*time.Second); err != nil {
		t.Fatalf("before the failure: %v\n%s", err, cli.Output())
	}
	b0, _ := p.Traffic(0, bk.Name)
	def.SetUp(t, false)
	if err := p.WaitTraffic(0, bk.Name, b0, 1<<20, cli, 20*time.Second); err != nil {
		t.Fatalf("with the default rail down, no traffic on the backup: %v\n%s", err, cli.Output())
	}
	waitStatusOnBackup(t, filepath.Join(xdg, "shift"), lr.name, cli)
	def.SetUp(t, true)
	d1, _ := p.Traffic(0, def.Name)
	if err := p.WaitTraffic(0, def.Name, d1, 1<<20, cli, 20*time.Second); err != nil {
		t.Fatalf("with the default rail back, no traffic on it: %v\n%s", err, cli.Output())
	}
	cout, cerr = cli.Wait(60 * time.Second)
	sout, serr = srv.Wait(60 * time.Second)
	return cout, cerr, sout, serr
}

// TestPlainDiesOnLinkDown is the same failure without SHIFT: the program ends with a
// transport error (retry counter exceeded), as it does on a ConnectX whose cable is pulled.
func TestPlainDiesOnLinkDown(t *testing.T) {
	p := netnsPair(t, "ib_write_bw")
	def := p.Rails[0][0]
	args := []string{"-D", "6", "-s", "65536"}
	_, cli := p.StartPair(t, tooltest.Mode{}, "ib_write_bw", args...)
	d0, _ := p.Traffic(0, def.Name)
	if err := p.WaitTraffic(0, def.Name, d0, 1<<20, cli, 20*time.Second); err != nil {
		t.Fatalf("before the failure: %v\n%s", err, cli.Output())
	}
	def.SetUp(t, false)
	out, err := cli.Wait(60 * time.Second)
	def.SetUp(t, true)
	if err == nil {
		t.Fatalf("ib_write_bw survived the pulled link without SHIFT:\n%s", out)
	}
	if !strings.Contains(out+err.Error(), "Failed status 12") {
		t.Fatalf("ib_write_bw failed (%v) without the transport error (status 12, retry counter exceeded):\n%s", err, out)
	}
}

// TestLinkWatchFailoverGap measures, over 20 link downs under a running ib_write_bw in SHIFT
// mode with the link watcher on (SHIFT_LINK_WATCH=1), the time from the down (the netlink
// call in host A's namespace) to the first data on the backup rail (two full packets'
// worth), and checks each resumes within the RC timeout it replaces.
func TestLinkWatchFailoverGap(t *testing.T) {
	p := netnsPair(t, "ib_write_bw")
	def, bk := p.Rails[0][0], p.Rails[1][0]
	const cycles = 20
	m := tooltest.Mode{Shift: "s0:s1", Job: fmt.Sprintf("watch-%d", port()), Extra: []string{"SHIFT_LINK_WATCH=1"}}
	args := []string{"-D", "40", "-s", "65536"}
	srv, cli := p.StartPair(t, m, "ib_write_bw", args...)
	var gaps []time.Duration
	for i := range cycles {
		d0, _ := p.Traffic(0, def.Name)
		if err := p.WaitTraffic(0, def.Name, d0, 1<<20, cli, 20*time.Second); err != nil {
			t.Fatalf("cycle %d, before the down: %v\n%s", i, err, cli.Output())
		}
		var gap time.Duration
		err := p.A.NS.Do(func() error {
			l, err := netlink.LinkByName(def.Name)
			if err != nil {
				return err
			}
			s, err := toolrun.ReadNetdev("/proc/thread-self/net/dev")
			if err != nil {
				return err
			}
			b0 := s[bk.Name].TxBytes
			t0 := time.Now()
			if err := netlink.LinkSetDown(l); err != nil {
				return err
			}
			for deadline := t0.Add(10 * time.Second); time.Now().Before(deadline); {
				s, err := toolrun.ReadNetdev("/proc/thread-self/net/dev")
				if err != nil {
					return err
				}
				if s[bk.Name].TxBytes >= b0+2*1024 { // two full RoCE packets (MTU 1024 on a 1500-byte veth)
					gap = time.Since(t0)
					return nil
				}
				time.Sleep(50 * time.Microsecond)
			}
			return fmt.Errorf("no data on the backup rail within 10 s")
		})
		if err != nil {
			t.Fatalf("cycle %d: %v\n%s", i, err, cli.Output())
		}
		gaps = append(gaps, gap)
		def.SetUp(t, true)
	}
	cout, cerr := cli.Wait(90 * time.Second)
	sout, serr := srv.Wait(90 * time.Second)
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v, server: %v\n--- client:\n%s\n--- server:\n%s", cerr, serr, cout, sout)
	}
	checkBWDuration(t, cout)
	slices.Sort(gaps)
	p50, p99 := gaps[len(gaps)/2], gaps[len(gaps)-1] // 20 samples: the largest is the p99
	t.Logf("link down -> data on the backup rail over %d downs: p50 %v, p99 %v, min %v", len(gaps), p50, p99, gaps[0])
	// perftest's RC timeout (timeout 14, retry 7) gives up after about 0.5 s; the watcher
	// must beat it.
	if p50 > 500*time.Millisecond {
		t.Errorf("median link-down to backup traffic %v: the link watcher did not act before the RC timeout", p50)
	}
}

// waitStatusOnBackup waits until the status file of the running program (an unmodified tool
// with the plugin in SHIFT mode) shows a QP of its default device s0 whose sends run on the
// backup s1: what shiftctl status and shiftctl metrics read of a live plugin process.
func waitStatusOnBackup(t *testing.T, dir, command string, cli *tooltest.Proc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last []failover.ProcessStatus
	for {
		st, err := failover.ReadStatusDir(dir, os.Getuid())
		if err == nil {
			last = st
			for _, p := range st {
				if p.PID != cli.Pid() || p.Command != command || p.Device != "s0" {
					continue
				}
				for _, q := range p.QPs {
					if q.NIC == "s1" && q.Fallbacks > 0 {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) || cli.Done() {
			t.Fatalf("no status of %s with a QP on s1 in %s (read error %v): %+v\n%s", command, dir, err, last, cli.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
