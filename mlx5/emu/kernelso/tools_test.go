package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/tooltest"
	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

// Debian's unmodified programs on Debian's own libmlx5, over emulated ConnectX devices
// served by this library: a provider nobody here wrote checks the emulated kernel and NIC.

func TestMain(m *testing.M) {
	code := m.Run()
	tooltest.RemoveBuild()
	os.Exit(code)
}

// connectx is a host with n emulated devices k0..k<n-1> with a ConnectX-6 identity (so that
// libmlx5 claims them) on fresh loopback addresses.
func connectx(t *testing.T, n int) *tooltest.Host {
	t.Helper()
	tooltest.RequireRoot(t)
	b := tooltest.BuildPlugin(t)
	var devs []tooltest.Device
	for i, ip := range tooltest.LoopbackAddrs(n) {
		devs = append(devs, tooltest.Device{Name: fmt.Sprintf("k%d", i), IP: ip, Netdev: "lo"})
	}
	return tooltest.NewHost(t, b, nil, emusysfs.ConnectX, devs...)
}

var libmlx5 = tooltest.Mode{Kernel: true}

// TestLibmlx5Devinfo: ibv_devinfo -v through libmlx5 reports the device, its active
// Ethernet port and its RoCE v2 GID.
func TestLibmlx5Devinfo(t *testing.T) {
	tooltest.RequireTools(t, "ibv_devinfo")
	h := connectx(t, 1)
	out, err := h.Start(t, libmlx5, "ibv_devinfo", "-v", "-d", "k0").Wait(30 * time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ip := h.Tree.Devices[0].IP.String()
	// The GUIDs are __be64 in query_device's answer; ibv_devinfo prints them as sysfs does.
	guid, err := os.ReadFile(filepath.Join(h.Tree.Root, "class/infiniband/k0/node_guid"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"node_guid:\t\t\t" + strings.TrimSpace(string(guid)), "hca_id:\tk0", "vendor_part_id:\t\t\t4123", "PORT_ACTIVE", "link_layer:\t\tEthernet", "::ffff:" + ip + ", RoCE v2"} {
		if !strings.Contains(out, want) {
			t.Errorf("ibv_devinfo -v lacks %q:\n%s", want, out)
		}
	}
}

// TestLibmlx5Tools runs the plugin's tool matrix (ibv_rc_pingpong -c with and without -N,
// ib_{write,send,read}_{bw,lat} with ibv_post_send and ibv_wr_*) with both processes on
// libmlx5.
func TestLibmlx5Tools(t *testing.T) {
	tooltest.RequireTools(t, tooltest.MatrixPrograms()...)
	h := connectx(t, 2)
	tooltest.RunMatrix(t, tooltest.Matrix(), h, h, libmlx5, libmlx5, "k0", "k1", "127.0.0.1")
}

// TestLibmlx5Events runs the programs that wait on completion channels (-e) on libmlx5:
// the channels and their events come from the emulated kernel's descriptors.
func TestLibmlx5Events(t *testing.T) {
	tooltest.RequireTools(t, "ibv_rc_pingpong", "ib_send_bw", "ib_read_bw")
	h := connectx(t, 2)
	tooltest.RunMatrix(t, tooltest.EventTools(), h, h, libmlx5, libmlx5, "k0", "k1", "127.0.0.1")
}

// TestInterop runs the matrix between a process on libmlx5 and one on libmlx5-shift (plain,
// through the preload object, since perftest links libmlx5), each way round.
func TestInterop(t *testing.T) {
	tooltest.RequireTools(t, tooltest.MatrixPrograms()...)
	h := connectx(t, 2)
	shift := tooltest.Mode{Preload: true}
	t.Run("libmlx5 server", func(t *testing.T) {
		tooltest.RunMatrix(t, tooltest.Matrix(), h, h, libmlx5, shift, "k0", "k1", "127.0.0.1")
	})
	t.Run("libmlx5-shift server", func(t *testing.T) {
		tooltest.RunMatrix(t, tooltest.Matrix(), h, h, shift, libmlx5, "k0", "k1", "127.0.0.1")
	})
}

// TestLibmlx5QPLifecycle runs bench/qpcycle.c on libmlx5: two QPs on one CQ (libmlx5 asks for
// CQE version 1 and finds a CQE's QP by the user index in it, so the emulated NIC must write
// each QP's own), one destroyed with completions possibly unpolled, the other reset and
// reconnected.
func TestLibmlx5QPLifecycle(t *testing.T) {
	h := connectx(t, 2)
	bin := tooltest.Harness(t, "qpcycle")
	for round := range 3 {
		out, err := h.Start(t, libmlx5, bin, "-d", "k0", "-D", "k1").Wait(time.Minute)
		if err != nil || !strings.Contains(out, "qpcycle: ok") {
			t.Fatalf("round %d: %v\n%s", round, err, out)
		}
	}
}

// TestLibmlx5AddressTaken: a second program creating a QP on a device whose address a first
// one holds (an emulated device's link binds its address at its first QP) fails there, and
// says why on standard error whatever SHIFT_EMU_DEBUG says: libmlx5 and the program only
// print that the QP could not be created.
func TestLibmlx5AddressTaken(t *testing.T) {
	tooltest.RequireTools(t, "ibv_rc_pingpong")
	h := connectx(t, 1)
	port := tooltest.Port()
	// ibv_rc_pingpong's server creates its QP before it listens.
	first := h.Start(t, libmlx5, "ibv_rc_pingpong", "-g", "0", "-d", "k0", "-p", fmt.Sprint(port))
	if err := first.WaitListening(port, 20*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, first.Output())
	}
	out, err := h.Start(t, libmlx5, "ibv_rc_pingpong", "-g", "0", "-d", "k0", "-p", fmt.Sprint(port+1)).Wait(30 * time.Second)
	if err == nil {
		t.Fatalf("a second program created a QP on k0 beside the first:\n%s", out)
	}
	ip := h.Tree.Devices[0].IP.String()
	if want := "emulated device k0 cannot take its RoCE address " + ip + ":4791"; !strings.Contains(err.Error(), want) {
		t.Fatalf("standard error lacks %q: %v", want, err)
	}
}

// TestOlderKernels runs Debian's libibverbs and libmlx5, and libmlx5-shift beside them, on
// emulated kernels that lack the ioctl forms of the context, port, CQ and QP commands
// (write-create) or the ioctl interface altogether (no-ioctl): libibverbs then sends the
// legacy write() commands (cmd_fallback.c), which checks the emulated kernel's write path
// against a library nobody here wrote, and the provider's own fallback against both.
func TestOlderKernels(t *testing.T) {
	tooltest.RequireTools(t, "ibv_devinfo", "ibv_rc_pingpong", "ib_write_bw", "ib_send_bw")
	tools := []tooltest.Tool{}
	for _, tl := range append(tooltest.Matrix(), tooltest.EventTools()...) {
		if tl.Name == "ibv_rc_pingpong" && len(tl.API) == 0 || tl.Name == "ib_write_bw" || tl.Name == "ib_send_bw" {
			tools = append(tools, tl)
		}
	}
	for _, k := range []string{"write-create", "no-ioctl"} {
		t.Run(k, func(t *testing.T) {
			h := connectx(t, 2)
			env := []string{"SHIFT_EMU_KERNEL=" + k}
			lib := tooltest.Mode{Kernel: true, Extra: env}
			shift := tooltest.Mode{Preload: true, Extra: env}
			out, err := h.Start(t, lib, "ibv_devinfo", "-v", "-d", "k0").Wait(30 * time.Second)
			if err != nil || !strings.Contains(out, "PORT_ACTIVE") || !strings.Contains(out, "RoCE v2") {
				t.Fatalf("ibv_devinfo -v: %v\n%s", err, out)
			}
			t.Run("libmlx5", func(t *testing.T) {
				tooltest.RunMatrix(t, tools, h, h, lib, lib, "k0", "k1", "127.0.0.1")
			})
			t.Run("interop", func(t *testing.T) {
				tooltest.RunMatrix(t, tools[:1], h, h, lib, shift, "k0", "k1", "127.0.0.1")
			})
		})
	}
}

// TestLibmlx5CQE128 runs libmlx5 with MLX5_CQE_SIZE=128: its CQs ask for 128-byte CQEs, and
// it reads each CQE from the second half of the entry.
func TestLibmlx5CQE128(t *testing.T) {
	tooltest.RequireTools(t, tooltest.MatrixPrograms()...)
	var tools []tooltest.Tool
	for _, tl := range append(tooltest.Matrix(), tooltest.EventTools()...) {
		if strings.HasSuffix(tl.Name, "_bw") && len(tl.API) == 0 || tl.Name == "ibv_rc_pingpong" {
			tools = append(tools, tl)
		}
	}
	h := connectx(t, 2)
	lib := tooltest.Mode{Kernel: true, Extra: []string{"MLX5_CQE_SIZE=128"}}
	tooltest.RunMatrix(t, tools, h, h, lib, lib, "k0", "k1", "127.0.0.1")
}

// TestLibmlx5SignalHandler runs the plugin's bench/sigcheck.c on Debian's libmlx5 over this
// library: SIGALRM every 20 µs, handled by a handler installed with signal() (no
// SA_ONSTACK), while WRITEs go through the emulated kernel and NIC, whose Go code runs on the
// program's threads and the runtime's. The library gives the handler SA_ONSTACK while a
// device is open (internal/cshared); with SHIFT_SIGNAL_ONSTACK=0 the program crashed
// (SIGSEGV) in the one run tried.
func TestLibmlx5SignalHandler(t *testing.T) {
	h := connectx(t, 2)
	bin := tooltest.Harness(t, "sigcheck")
	out, err := h.Start(t, libmlx5, bin, "-d", "k0", "-D", "k1").Wait(3 * time.Minute)
	if err != nil || !strings.Contains(out, "sigcheck: ok") || strings.Contains(out, "did not get SA_ONSTACK") {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(out))
}
