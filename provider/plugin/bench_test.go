package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/toolrun"
	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// BenchmarkVerbs times single verbs calls through libibverbs with the C harness
// bench/verbsbench.c: one ibv_post_send of a 64-byte inline RDMA WRITE (one SGE), one empty
// ibv_poll_cq, one ibv_post_recv (one SGE) and one ibv_poll_cq that returns a completion, on
// two emulated devices of one process: libmlx5-shift in plain mode (the C data path), in
// SHIFT mode (Default state: posts and polls in C behind the failover layer's gates,
// spost.c and spoll.c) and in SHIFT mode with SHIFT_C_DATAPATH=0 (every post and non-empty
// poll through Go), and Debian's own libmlx5 over the emulated kernel library (mlx5/emu/kernelso) on the same emulated rings. Each sub-benchmark
// reports the harness's figures as ns/post, ns/poll, ns/recv and ns/poll1; compare runs
// with benchstat:
//
//	go test ./provider/plugin -run '^$' -bench Verbs -count 6 | tee new.txt
//
// It needs root (the /dev/infiniband stand-ins) and libibverbs-dev.
func BenchmarkVerbs(b *testing.B) {
	bld := tooltest.BuildPlugin(b)
	bin := harness(b, "verbsbench")
	h := tooltest.NewHost(b, bld, nil, emusysfs.Shift, devices(addrs(2), "lo")...)
	var cx []tooltest.Device
	for i, ip := range addrs(2) {
		cx = append(cx, tooltest.Device{Name: fmt.Sprintf("s%d", i), IP: ip, Netdev: "lo"})
	}
	hx := tooltest.NewHost(b, bld, nil, emusysfs.ConnectX, cx...)
	for _, m := range []struct {
		name string
		host *tooltest.Host
		mode tooltest.Mode
	}{
		{"plain", h, tooltest.Mode{}},
		{"shift", h, tooltest.Mode{Shift: "s0:s1,s1:s0", Job: fmt.Sprintf("bench-%d", port())}},
		{"shift-go", h, tooltest.Mode{Shift: "s0:s1,s1:s0", Job: fmt.Sprintf("bench-%d", port()), Extra: []string{"SHIFT_C_DATAPATH=0"}}},
		{"libmlx5", hx, tooltest.Mode{Kernel: true}},
	} {
		b.Run(m.name, func(b *testing.B) {
			// One harness process per run (it starts two emulated NICs), timing a fixed
			// number of calls whatever b.N the framework asks for; its figures are the
			// result, so the run's own time per b.N is suppressed.
			p := m.host.Start(b, m.mode, bin, "-d", "s0", "-D", "s1", "-n", strconv.Itoa(1<<16), "-s", "64")
			out, err := p.Wait(2 * time.Minute)
			if err != nil {
				b.Fatalf("verbsbench: %v\n%s", err, out)
			}
			b.ReportMetric(0, "ns/op")
			for _, f := range []struct{ name, unit string }{
				{"post_send_ns", "ns/post"}, {"poll_empty_ns", "ns/poll"}, {"post_recv_ns", "ns/recv"}, {"poll_one_ns", "ns/poll1"},
			} {
				v, err := harnessFigure(out, f.name)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(v, f.unit)
			}
		})
	}
}

// harnessFigure reads NAME=VALUE from verbsbench's output line.
func harnessFigure(out, name string) (float64, error) {
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("verbsbench printed no %s: %q", name, out)
}

// BenchmarkPerftest runs Debian's ib_write_lat and ib_send_lat (64 bytes, 3000 iterations,
// the ibv_wr_* API; reporting perftest's typical and average latency) and ib_write_bw with
// 64-byte messages (reporting its message rate) between two processes on one emulated pair:
// libmlx5-shift plain, libmlx5-shift SHIFT, and Debian's libmlx5 over the emulated kernel
// library.
//
//	go test ./provider/plugin -run '^$' -bench Perftest -count 3 | tee perftest.txt
//
// The emulated NICs are Go goroutines exchanging UDP over loopback, so the figures are the
// emulator's round trip plus the provider's; the providers on the same pair is the comparison
// that means something.
func BenchmarkPerftest(b *testing.B) {
	tooltest.RequireTools(b, "ib_write_lat", "ib_send_lat", "ib_write_bw")
	bld := tooltest.BuildPlugin(b)
	h := tooltest.NewHost(b, bld, nil, emusysfs.Shift, devices(addrs(4), "lo")...)
	var cx []tooltest.Device
	for i, ip := range addrs(2) {
		cx = append(cx, tooltest.Device{Name: fmt.Sprintf("s%d", i), IP: ip, Netdev: "lo"})
	}
	hx := tooltest.NewHost(b, bld, nil, emusysfs.ConnectX, cx...)
	for _, prog := range []string{"ib_write_lat", "ib_send_lat", "ib_write_bw"} {
		for _, m := range []struct {
			name string
			host *tooltest.Host
			mode tooltest.Mode
		}{
			{"plain", h, tooltest.Mode{}},
			{"shift", h, tooltest.Mode{Shift: "s0:s2,s1:s3", Job: fmt.Sprintf("lat-%d", port())}},
			{"libmlx5", hx, tooltest.Mode{Kernel: true}},
		} {
			b.Run(prog+"/"+m.name, func(b *testing.B) {
				args := []string{"-n", "3000", "-s", "64"}
				if prog == "ib_write_bw" {
					args = []string{"-n", "20000", "-s", "64"}
				}
				r := tooltest.RunPair(b, m.host, m.host, m.mode, m.mode, prog, args, port(), "s0", "s1", "127.0.0.1", 2*time.Minute)
				if r.ClientErr != nil || r.ServerErr != nil {
					b.Fatalf("client: %v, server: %v\n--- client:\n%s\n--- server:\n%s", r.ClientErr, r.ServerErr, r.Client, r.Server)
				}
				b.ReportMetric(0, "ns/op")
				if prog == "ib_write_bw" {
					bw, err := toolrun.ParseBW(r.Client)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(bw.MsgRateMpp*1e3, "Kmsg/s")
					return
				}
				l, err := toolrun.ParseLat(r.Client)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(l.Typical, "us-typical")
				b.ReportMetric(l.Avg, "us-avg")
			})
		}
	}
}

// BenchmarkFastPost times the C data path's post_send with no device behind the rings (one
// cgo call runs all b.N posts, so ns/op is one post), beside package provider's
// BenchmarkPostSendInline64 and BenchmarkPostSendSGE, which post the same WRs in Go:
//
//	go test ./provider/plugin -run '^$' -bench 'Fast' -count 6
//	go test ./provider -run '^$' -bench 'PostSendInline64|PostSendSGE|PollEmpty' -count 6
func BenchmarkFastPost(b *testing.B) {
	for _, inline := range []bool{true, false} {
		name := "sge"
		if inline {
			name = "inline64"
		}
		b.Run(name, func(b *testing.B) {
			sq, db, uar, src := mappedB(b, 256*64), mappedB(b, 64), mappedB(b, 4096), mappedB(b, 4096)
			b.ResetTimer()
			if err := checkPostLoop(sq, db, uar[0x800:], src, b.N, inline); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkFastPollEmpty times the C poll of an empty CQ (ibv_poll_cq's provider part).
func BenchmarkFastPollEmpty(b *testing.B) {
	buf, db := mappedB(b, 64*64), mappedB(b, 64)
	b.ResetTimer()
	if n := checkPollLoop(buf, db, b.N); n != 0 {
		b.Fatalf("an empty CQ gave %d completions", n)
	}
}

func mappedB(b *testing.B, n int) []byte {
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Munmap(m) })
	return m
}
