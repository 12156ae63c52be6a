package failover

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/provider/verbs"
)

// statusOf reads dir and returns the status of the context on device dev (nil if none).
func statusOf(t *testing.T, dir, dev string) *ProcessStatus {
	t.Helper()
	all, err := ReadStatusDir(dir, os.Geteuid())
	if err != nil {
		t.Fatalf("read status: %v", err)
	}
	for i := range all {
		if all[i].Device == dev {
			return &all[i]
		}
	}
	return nil
}

// TestStatusFile: host 0 publishes its status file in a private directory; host 1, given a
// directory other users may write, runs without one and says why. The file follows a switch
// to the backup and back (the publisher is woken by the transitions: the interval is an
// hour), readers remove the files of gone processes, and Close removes the context's own.
func TestStatusFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shift")
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the contexts closed (cleanups run last first)
		left, _ := filepath.Glob(filepath.Join(dir, "status-*"))
		if len(left) != 0 {
			t.Errorf("status files left after Close: %v", left)
		}
	})
	e := newEnvWith(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		o.StatusDir, o.StatusInterval = dir, time.Hour
		if h == 1 {
			o.StatusDir = open
		}
	})
	ha, hb := e.hosts[0].ctx, e.hosts[1].ctx
	if err := hb.StatusErr(); !errors.Is(err, rundir.ErrUnsafe) || hb.StatusFile() != "" {
		t.Errorf("host 1 in a directory others may write: %v, file %q", err, hb.StatusFile())
	}
	if err := ha.StatusErr(); err != nil || !strings.HasPrefix(ha.StatusFile(), dir+"/status-") {
		t.Fatalf("host 0: %v, file %q", err, ha.StatusFile())
	}
	if st, err := os.Lstat(ha.StatusFile()); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("status file mode: %v, %v", st.Mode(), err)
	}
	s := statusOf(t, dir, e.device(0))
	if s == nil || s.PID != os.Getpid() || s.KV != "mem" || s.LinkWatch != "none: emulated device, its link events come from the fabric" || s.Job != e.job ||
		len(s.Backups) != 1 || s.Backups[0] != e.device(1) || len(s.QPs) != 0 || s.IntervalSeconds != 3600 || s.Command == "" {
		t.Fatalf("before any QP: %+v", s)
	}

	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	a, b := e.pairs(t, 1, cp)
	desc := func() string { return e.describe(a[0], b[0]) }
	if err := ha.PublishStatus(); err != nil {
		t.Fatal(err)
	}
	s = statusOf(t, dir, e.device(0))
	if len(s.QPs) != 1 {
		t.Fatalf("QPs %+v", s.QPs)
	}
	q := s.QPs[0]
	if q.QPN != a[0].QPN() || q.SendState != "Default" || q.RecvState != "Default" || q.NIC != e.device(0) ||
		q.RecvNIC != e.device(0) || !q.BackupReady || q.BackupQPN == 0 || q.Fallbacks != 0 || q.TimeOnBackup != 0 ||
		q.LastEvent != "" || len(q.BackupChain) != 1 || q.BackupChain[0] != e.device(1) {
		t.Fatalf("QP on the default NIC: %+v", q)
	}

	if err := a[0].SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file to show the QP on the backup", func() bool {
		s = statusOf(t, dir, e.device(0))
		return len(s.QPs) == 1 && s.QPs[0].SendState == "Fallback" && s.QPs[0].RecvState == "Fallback" && s.QPs[0].Fallbacks == 1
	}, desc)
	q = s.QPs[0]
	if q.NIC != e.device(1) || q.RecvNIC != e.device(1) || q.LastEvent == "" || q.LastEventTime.IsZero() ||
		q.TimeOnBackup <= 0 || s.Counters.Fallbacks != 1 {
		t.Errorf("QP on the backup: %+v, counters %+v", q, s.Counters)
	}
	a[0].SwitchToDefault()
	waitFor(t, "the file to show the QP back on the default NIC", func() bool {
		s = statusOf(t, dir, e.device(0))
		return len(s.QPs) == 1 && s.QPs[0].SendState == "Default" && s.QPs[0].RecvState == "Default" && s.QPs[0].Recoveries == 1
	}, desc)
	q = s.QPs[0]
	if q.NIC != e.device(0) || q.Probes == 0 || q.TimeOnBackup <= 0 || q.LastEvent != "Drained" {
		t.Errorf("QP back on the default NIC: %+v", q)
	}
	// Off the backup, the time on it stays put.
	if got := a[0].status(time.Now().Add(time.Hour), nil).TimeOnBackup; got != a[0].status(time.Now(), nil).TimeOnBackup {
		t.Errorf("time on the backup grows on the default NIC: %v", got)
	}

	// Stale files: a gone pid, a reused pid (another start time), and a temporary file of a
	// gone process are removed by the reader; a malformed file of a live process is
	// reported and left.
	start, err := rundir.ProcStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	stale := []string{rundir.StatusName(1<<22+4321, 7, 1), rundir.StatusName(os.Getpid(), start+1, 1),
		rundir.StatusName(1<<22+4321, 7, 2) + rundir.TempSuffix}
	bad := rundir.StatusName(os.Getpid(), start, 1<<40)
	for _, n := range append(stale, bad) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	all, err := ReadStatusDir(dir, os.Geteuid())
	if !errors.Is(err, ErrBadStatus) || !strings.Contains(err.Error(), bad) || len(all) != 1 {
		t.Errorf("with a malformed file: %d statuses, %v", len(all), err)
	}
	for _, n := range stale {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			t.Errorf("stale %s not removed", n)
		}
	}
	if err := os.Remove(filepath.Join(dir, bad)); err != nil {
		t.Fatal(err)
	}
	// A reader refuses a directory another user could write.
	if _, err := ReadStatusDir(open, os.Geteuid()); !errors.Is(err, rundir.ErrUnsafe) {
		t.Errorf("open directory: %v", err)
	}
}

// A negative interval: no status file, no error.
func TestStatusOff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shift")
	e := newEnvWith(t, 16, func(h int, o *Options) { o.StatusDir, o.StatusInterval = dir, -1 })
	for _, h := range e.hosts {
		if h.ctx.StatusFile() != "" || h.ctx.StatusErr() != nil {
			t.Errorf("%q, %v", h.ctx.StatusFile(), h.ctx.StatusErr())
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("%s created", dir)
	}
}

// BenchmarkPublishStatus: one publication (marshal, temporary file, rename) of a context
// with 16 QPs.
func BenchmarkPublishStatus(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "shift")
	e := newEnvWith(b, 256, func(h int, o *Options) { o.StatusDir, o.StatusInterval = dir, time.Hour })
	e.pairs(b, 16, verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	c := e.hosts[0].ctx
	b.ReportAllocs()
	for b.Loop() {
		if err := c.PublishStatus(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadStatusDir: one read of a directory with the two contexts' files (16 QPs each).
func BenchmarkReadStatusDir(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "shift")
	e := newEnvWith(b, 256, func(h int, o *Options) { o.StatusDir, o.StatusInterval = dir, time.Hour })
	e.pairs(b, 16, verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	for _, h := range e.hosts {
		if err := h.ctx.PublishStatus(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if s, err := ReadStatusDir(dir, os.Geteuid()); err != nil || len(s) != 2 || len(s[0].QPs) != 16 {
			b.Fatalf("%d statuses, %v", len(s), err)
		}
	}
}
