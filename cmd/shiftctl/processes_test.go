package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/mlx5/emu"
)

// liveShift is a live SHIFT process for status and metrics: this test process, with a
// failover context on each of two emulated hosts and one connected QP pair. The contexts
// publish their status files in a fresh runtime directory (XDG_RUNTIME_DIR), every hour:
// what a reader sees between two PublishStatus calls changed through the state transitions.
type liveShift struct {
	prefix string
	a, b   *foHost
	dir    string // the runtime directory
}

func newLiveShift(t *testing.T, tag string) *liveShift {
	t.Helper()
	xdg := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	prefix := fmt.Sprintf("%s%d_", tag, os.Getpid())
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	store, job := kv.NewMem(), fmt.Sprintf("%s%d", tag, os.Getpid())
	hourly := func(o *failover.Options) { o.StatusInterval = time.Hour }
	l := &liveShift{prefix: prefix, dir: filepath.Join(xdg, "shift")}
	l.b = openFOHost(t, prefix, 1, store, job, hourly)
	l.a = openFOHost(t, prefix, 0, store, job, hourly)
	connectFOPair(t, l.a, l.b, 0x300, 0x9300)
	for _, h := range []*foHost{l.a, l.b} {
		if err := h.ctx.PublishStatus(); err != nil { // the QP's creation woke the publisher: sooner
			t.Fatal(err)
		}
		if err := h.ctx.StatusErr(); err != nil || filepath.Dir(h.ctx.StatusFile()) != l.dir {
			t.Fatalf("status file %q: %v", h.ctx.StatusFile(), err)
		}
	}
	return l
}

// toBackup moves host A's QP to the backup, waits until both sides run there, and
// publishes A's status.
func (l *liveShift) toBackup(t *testing.T) {
	t.Helper()
	if err := l.a.qp.SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // failure guard only
	for l.a.qp.SendState() != failover.SendFallback || l.b.qp.SendState() != failover.SendFallback {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the backup: A %v B %v", l.a.qp.SendState(), l.b.qp.SendState())
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.a.ctx.PublishStatus(); err != nil {
		t.Fatal(err)
	}
}

// qpOf finds QP qpn of device dev of this process in a report.
func qpOf(rep processReport, dev string, qpn uint32) (failover.ProcessStatus, failover.QPStatus, bool) {
	for _, p := range rep.Processes {
		if p.PID != os.Getpid() || p.Device != dev {
			continue
		}
		for _, q := range p.QPs {
			if q.QPN == qpn {
				return p, q, true
			}
		}
	}
	return failover.ProcessStatus{}, failover.QPStatus{}, false
}

// TestStatusProcesses: shiftctl status lists this process's contexts and QPs (JSON and
// table), removes the status file of a gone process, and with -w -n 2 prints two reports,
// the second after a switch to the backup.
func TestStatusProcesses(t *testing.T) {
	l := newLiveShift(t, "sp")
	start, err := rundir.ProcStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(l.dir, rundir.StatusName(os.Getpid(), start+1, 1)) // a pid reused since
	if err := os.WriteFile(stale, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := emptySysfs(t)
	rep, text := statusJSON(t, root)
	p, q, ok := qpOf(rep.Shift, l.prefix+"0", l.a.qp.QPN())
	if !ok {
		t.Fatalf("QP %#x of this process not listed: %s", l.a.qp.QPN(), text)
	}
	if p.KV != "mem" || p.LinkWatch != "none: emulated device, its link events come from the fabric" || len(p.Backups) != 1 || p.Backups[0] != l.prefix+"1" ||
		q.SendState != "Default" || q.NIC != l.prefix+"0" || !q.BackupReady || q.Fallbacks != 0 {
		t.Errorf("before the switch: %+v %+v", p, q)
	}
	if _, _, ok := qpOf(rep.Shift, l.prefix+"2", l.b.qp.QPN()); !ok {
		t.Errorf("host B's QP not listed")
	}
	if len(rep.Shift.Errors) != 0 || len(rep.Shift.Dirs) == 0 || rep.Shift.Dirs[0] != l.dir {
		t.Errorf("dirs %v, errors %v", rep.Shift.Dirs, rep.Shift.Errors)
	}
	if _, err := os.Lstat(stale); err == nil {
		t.Errorf("the stale status file was left")
	}

	var out, errw strings.Builder
	if code := run([]string{"status", "-sysfs", root}, &out, &errw); code != 0 {
		t.Fatalf("table: exit %d: %s", code, errw.String())
	}
	me := strconv.Itoa(os.Getpid())
	qpn := fmt.Sprintf("%#x", l.a.qp.QPN())
	for _, want := range []string{"SHIFT processes (status files in " + l.dir, "COMMAND", "LINK_WATCH", "ON_BACKUP", "LAST_EVENT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if !hasRow(out.String(), me, l.prefix+"0", qpn, "Default", "Default", "Idle", "None", l.prefix+"0") {
		t.Errorf("no row for QP %s on the default NIC:\n%s", qpn, out.String())
	}

	// -w with two reports; between them the QP moves to the backup.
	statusRefreshHook = func(n int) {
		if n == 1 {
			l.toBackup(t)
		}
	}
	t.Cleanup(func() { statusRefreshHook = nil })
	out.Reset()
	if code := run([]string{"status", "-json", "-sysfs", root, "-w", "1ms", "-n", "2"}, &out, &errw); code != 0 {
		t.Fatalf("-w: exit %d: %s", code, errw.String())
	}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	var reps []statusReport
	for {
		var r statusReport
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("-w -json output: %v", err)
		}
		reps = append(reps, r)
	}
	if len(reps) != 2 {
		t.Fatalf("%d reports, want 2", len(reps))
	}
	_, q1, _ := qpOf(reps[0].Shift, l.prefix+"0", l.a.qp.QPN())
	_, q2, _ := qpOf(reps[1].Shift, l.prefix+"0", l.a.qp.QPN())
	if q1.SendState != "Default" || q2.SendState != "Fallback" || q2.NIC != l.prefix+"1" || q2.Fallbacks != 1 ||
		q2.LastEvent == "" || q2.TimeOnBackup <= 0 {
		t.Errorf("reports: %+v then %+v", q1, q2)
	}
	statusRefreshHook = nil
	out.Reset()
	if code := run([]string{"status", "-sysfs", root, "-w", "1ms", "-n", "2"}, &out, &errw); code != 0 {
		t.Fatalf("-w table: exit %d: %s", code, errw.String())
	}
	if strings.Count(out.String(), "=== shiftctl status, report ") != 2 ||
		!hasRow(out.String(), me, l.prefix+"0", qpn, "Fallback", "Fallback", "Idle", "Local", l.prefix+"1") {
		t.Errorf("-w table:\n%s", out.String())
	}
	for _, bad := range [][]string{{"-w", "-1s"}, {"-n", "2"}, {"-w", "1s", "-n", "-1"}} {
		if code := run(append([]string{"status"}, bad...), &out, &errw); code != 2 {
			t.Errorf("%v: exit %d", bad, code)
		}
	}
}

// hasRow reports whether a line of s starts with these fields.
func hasRow(s string, fields ...string) bool {
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
