package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider/verbs"
	"golang.org/x/sys/unix"
)

func TestParseSwitchArgs(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		args []string
		want switchArgs // compared when ok
		ok   bool
	}{
		{[]string{"-pid", me, "-qpn", "0x100", "-to", "backup"},
			switchArgs{pid: os.Getpid(), qpn: 0x100, toBackup: true, timeout: 5 * time.Second}, true},
		{[]string{"-pid", "7", "-qpn", "257", "-to", "default", "-file", "f", "-timeout", "250ms"},
			switchArgs{pid: 7, qpn: 257, file: "f", timeout: 250 * time.Millisecond}, true},
		{[]string{"-pid", "7", "-qpn", "0xffffff", "-to", "backup"},
			switchArgs{pid: 7, qpn: 0xffffff, toBackup: true, timeout: 5 * time.Second}, true},
		{[]string{"-qpn", "0x100", "-to", "backup"}, switchArgs{}, false},                  // no pid
		{[]string{"-pid", "-3", "-qpn", "0x100", "-to", "backup"}, switchArgs{}, false},    // bad pid
		{[]string{"-pid", "7", "-to", "backup"}, switchArgs{}, false},                      // no QPN
		{[]string{"-pid", "7", "-qpn", "0", "-to", "backup"}, switchArgs{}, false},         // QPN 0
		{[]string{"-pid", "7", "-qpn", "0x1000000", "-to", "backup"}, switchArgs{}, false}, // 25 bits
		{[]string{"-pid", "7", "-qpn", "all", "-to", "backup"}, switchArgs{}, false},       // no "all" here
		{[]string{"-pid", "7", "-qpn", "0x100"}, switchArgs{}, false},                      // no -to
		{[]string{"-pid", "7", "-qpn", "0x100", "-to", "sideways"}, switchArgs{}, false},   // bad -to
		{[]string{"-pid", "7", "-qpn", "0x100", "-to", "backup", "-timeout", "0s"}, switchArgs{}, false},
		{[]string{"-pid", "7", "-qpn", "0x100", "-to", "backup", "stray"}, switchArgs{}, false},
	} {
		got, err := parseSwitchArgs(c.args)
		if !c.ok {
			if err == nil {
				t.Errorf("%v: accepted as %+v", c.args, got)
			} else if !errors.Is(err, unix.EINVAL) && !strings.Contains(err.Error(), "unexpected argument") {
				t.Errorf("%v: %v does not wrap EINVAL", c.args, err)
			}
			var out, errw strings.Builder
			if code := run(append([]string{"switch"}, c.args...), &out, &errw); code != 2 {
				t.Errorf("%v: exit %d, want 2 (%s)", c.args, code, errw.String())
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
	var out, errw strings.Builder
	if code := run([]string{"switch", "-bogus"}, &out, &errw); code != 2 {
		t.Errorf("unknown flag: exit %d", code)
	}
	if code := run([]string{"switch", "-h"}, &out, &errw); code != 0 || !strings.Contains(out.String(), "-to WHERE") {
		t.Errorf("-h: exit %d, %q", code, out.String())
	}
}

// The refusals before any exchange: a missing file, a dead process, a file nobody serves.
func TestSwitchErrors(t *testing.T) {
	dir := t.TempDir()
	me := strconv.Itoa(os.Getpid())
	var out strings.Builder
	missing := filepath.Join(dir, "absent")
	err := switchMain([]string{"-pid", me, "-qpn", "0x100", "-to", "backup", "-file", missing}, &out)
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "SHIFT_INJECT_SHM=1") || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	unserved := filepath.Join(dir, "unserved")
	if err := os.WriteFile(unserved, make([]byte, failover.InjectFileSize), 0o600); err != nil {
		t.Fatal(err)
	}
	var errw strings.Builder
	args := []string{"switch", "-pid", me, "-qpn", "0x100", "-to", "backup", "-file", unserved, "-timeout", "50ms"}
	if code := run(args, &out, &errw); code != 1 || !strings.Contains(errw.String(), "did not answer") {
		t.Errorf("unserved file: exit %d, %q", code, errw.String())
	}
	for p := 4194000; p > 1000; p-- {
		if unix.Kill(p, 0) == unix.ESRCH {
			err := switchMain([]string{"-pid", strconv.Itoa(p), "-qpn", "0x100", "-to", "backup"}, &out)
			if !errors.Is(err, unix.ESRCH) {
				t.Errorf("pid %d: %v", p, err)
			}
			break
		}
	}
	if out.Len() != 0 {
		t.Errorf("output on failures: %q", out.String())
	}
}

// End to end: this process serves an injection file through a failover context on host 0,
// and `shiftctl switch` moves its QP to the backup and back; WRITEs complete with the data in
// each phase, and an unknown QPN is refused with the library's ENOENT.
func TestSwitchEndToEnd(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shift-inject")
	prefix := fmt.Sprintf("sw%d_", os.Getpid())
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	store, job := kv.NewMem(), fmt.Sprintf("switch%d", os.Getpid())
	b := openFOHost(t, prefix, 1, store, job, nil)
	a := openFOHost(t, prefix, 0, store, job, func(o *failover.Options) { o.InjectFile = file })
	connectFOPair(t, a, b, 0x200, 0x9200)
	data := func(i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("switch %d ", i), 200)) }
	if wc := writeAndWait(t, a, b, 0, data(0)); wc.Status != verbs.WCSuccess {
		t.Fatalf("WRITE before the switch: %v", wc.Status)
	}
	me := strconv.Itoa(os.Getpid())
	qpn := fmt.Sprintf("%#x", a.qp.QPN())
	shiftctl := func(to string, wantCode int) string {
		t.Helper()
		var out, errw strings.Builder
		args := []string{"switch", "-pid", me, "-qpn", qpn, "-to", to, "-file", file, "-timeout", "30s"}
		if code := run(args, &out, &errw); code != wantCode {
			t.Fatalf("shiftctl %v: exit %d, want %d: %s%s", args, code, wantCode, out.String(), errw.String())
		}
		return out.String() + errw.String()
	}
	waitState := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // failure guard only
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: A %v/%v B %v/%v", what,
					a.qp.SendState(), a.qp.RecvState(), b.qp.SendState(), b.qp.RecvState())
			}
			time.Sleep(time.Millisecond)
		}
	}

	if got, want := shiftctl("backup", 0), fmt.Sprintf("QP %s of pid %s: moving to the backup\n", qpn, me); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	waitState("both QPs on the backup", func() bool {
		return a.qp.SendState() == failover.SendFallback && b.qp.SendState() == failover.SendFallback
	})
	if wc := writeAndWait(t, a, b, 1, data(1)); wc.Status != verbs.WCSuccess || wc.WRID != 1001 {
		t.Fatalf("WRITE on the backup: %+v", wc)
	}
	if out := shiftctl("backup", 1); !strings.Contains(out, "refuse the switch") || !strings.Contains(out, "switch QP "+qpn+" to the backup") {
		t.Errorf("second switch to the backup: %q", out)
	}
	if got, want := shiftctl("default", 0), fmt.Sprintf("QP %s of pid %s: moving back to the default NIC\n", qpn, me); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	waitState("both QPs back on the default NIC", func() bool {
		return a.qp.SendState() == failover.SendDefault && b.qp.SendState() == failover.SendDefault &&
			a.qp.RecvState() == failover.RecvDefault && b.qp.RecvState() == failover.RecvDefault
	})
	if wc := writeAndWait(t, a, b, 2, data(2)); wc.Status != verbs.WCSuccess {
		t.Fatalf("WRITE after the switch back: %v", wc.Status)
	}
	if st := a.ctx.Stats(); st.Fallbacks != 1 || st.Recoveries != 1 {
		t.Errorf("stats after one switch there and back: %+v", st)
	}
	qpn = "0xfffff0" // no QP of host 0 has it (QPNs of the emulator are small)
	if out := shiftctl("backup", 1); !strings.Contains(out, "no QP with this number") {
		t.Errorf("unknown QPN: %q", out)
	}
}
