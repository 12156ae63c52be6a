package failover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
	"golang.org/x/sys/unix"
)

// answerTimeout guards every RequestSwitch that expects an answer (the watcher polls every
// 10 ms; a loaded machine may delay it, never by this much).
const answerTimeout = 30 * time.Second

// TestSwitchThroughFile drives active switching the way shiftctl switch does: host 0 maps an
// injection file, RequestSwitch moves its QP (and so the peer's) to the backup and back, with
// a stream checked for exactly-once delivery in each phase, and the refusals come back as
// errnos.
func TestSwitchThroughFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shift-inject")
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e := newEnvWith(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		if h == 0 {
			o.InjectFile = path // host 1 maps none: only host 0's QPs are reachable
		}
	})
	a, b := e.pairs(t, 1, cp)
	desc := func() string { return e.describe(a[0], b[0]) }
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 100, size: 512, failAt: -1, seed: 21})

	// To the default while on the default: refused, nothing moves.
	if err := RequestSwitch(path, a[0].QPN(), false, answerTimeout); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("to the default before any switch: %v", err)
	}
	if err := RequestSwitch(path, a[0].QPN(), true, answerTimeout); err != nil {
		t.Fatalf("to the backup: %v", err)
	}
	// Both sides run on the backup and stay there: B follows A's switch (the notification
	// says A is pinned) and does not probe the path A switched away from.
	waitFor(t, "both QPs on the backup", func() bool { return allFallback(a[0], b[0]) }, desc)
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 200, size: 512, failAt: -1, seed: 22})
	runStream(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 200, size: 512, failAt: -1, seed: 23})
	// Again to the backup: the states refuse it (verbs.ErrQPState → EBUSY).
	err := RequestSwitch(path, a[0].QPN(), true, answerTimeout)
	if !errors.Is(err, unix.EBUSY) {
		t.Fatalf("second switch to the backup: %v", err)
	}
	if a[0].SendState() != SendFallback || e.hosts[0].ctx.Stats().Recoveries != 0 {
		t.Fatalf("left the backup without a request: %s", desc())
	}

	if err := RequestSwitch(path, a[0].QPN(), false, answerTimeout); err != nil {
		t.Fatalf("to the default: %v", err)
	}
	waitFor(t, "both QPs back on the default NIC", func() bool { return allDefault(a[0], b[0]) }, desc)
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 200, size: 512, failAt: -1, seed: 24})
	if sa := e.hosts[0].ctx.Stats(); sa.Fallbacks != 1 || sa.Recoveries != 1 || !allDefault(a[0], b[0]) {
		t.Fatalf("after the switch back (%+v): %s", sa, desc())
	}

	// A QPN no context of the file has.
	unknown := uint32(0xfffff0)
	if e.hosts[0].ctx.live.lookup(unknown) != nil {
		t.Fatalf("QPN %#x exists", unknown)
	}
	if err := RequestSwitch(path, unknown, true, answerTimeout); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("unknown QPN: %v", err)
	}
	// A destroyed QP is gone from the registry (the cleanups destroy the rest).
	extra, _ := e.connect(t, e.hosts[0], e.hosts[1], cp, 0x700)
	if e.hosts[0].ctx.live.lookup(extra.QPN()) != extra {
		t.Fatal("CreateQP did not register the QP")
	}
	if err := extra.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := RequestSwitch(path, extra.QPN(), true, answerTimeout); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("destroyed QP: %v", err)
	}
}

// TestSwitchFileProtocol checks the file protocol without devices: growing an old file,
// dropping a stale request, answers without a context, serialised writers, and the errors
// of a file nobody serves.
func TestSwitchFileProtocol(t *testing.T) {
	dir := t.TempDir()

	// A 16-byte file of an older library: no writer touches it, mapping grows it.
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, make([]byte, 16), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RequestSwitch(old, 0x10, true, time.Second); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("request into a 16-byte file: %v", err)
	}
	so, err := mapInjectFile(old, "")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(old); err != nil || st.Size() != InjectFileSize {
		t.Errorf("mapped old file: %v, size %d, want %d", err, st.Size(), InjectFileSize)
	}
	if err := so.release(); err != nil {
		t.Fatal(err)
	}

	// Nobody serves the file yet: the request times out and stays pending; the next writer
	// waits for it and times out too, without overwriting it.
	path := filepath.Join(dir, "unserved")
	if err := os.WriteFile(path, make([]byte, InjectFileSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RequestSwitch(path, 0x10, true, 50*time.Millisecond); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("unserved file: %v", err)
	}
	if err := RequestSwitch(path, 0x11, false, 50*time.Millisecond); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("second request on an unserved file: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if w := switchWordsOf(raw); w.qpn.Load() != 0x10 || w.op.Load() != switchOpBackup || w.req.Load() != 1 || w.done.Load() != 0 {
		t.Fatalf("pending request overwritten: qpn %#x op %d req %d done %d", w.qpn.Load(), w.op.Load(), w.req.Load(), w.done.Load())
	}
	// A process mapping the file drops that stale request.
	s, err := mapInjectFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.release(); err != nil {
			t.Errorf("release: %v", err)
		}
	})
	sw := switchWordsOf(s.mem)
	if req, done := sw.req.Load(), sw.done.Load(); req != 1 || done != 1 {
		t.Fatalf("stale request kept at mapping: req %d done %d", req, done)
	}

	// No context joined the watcher: every request is answered ENOENT. Concurrent writers
	// take turns: each gets its own answer and the sequence advances once per request.
	req0 := sw.req.Load()
	const writers = 4
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = RequestSwitch(path, uint32(0x20+i), i%2 == 0, answerTimeout)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, unix.ENOENT) {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if req, done := sw.req.Load(), sw.done.Load(); req != req0+writers || done != req {
		t.Errorf("after %d requests from %d: req %d done %d", writers, req0, req, done)
	}

	// Arguments and files.
	if err := RequestSwitch(path, 0, true, time.Second); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QPN 0: %v", err)
	}
	if err := RequestSwitch(path, 0x1000000, true, time.Second); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QPN 0x1000000: %v", err)
	}
	if err := RequestSwitch(filepath.Join(dir, "absent"), 0x10, true, time.Second); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// The answers of a refused SwitchToBackup.
func TestSwitchErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want unix.Errno
	}{
		{nil, 0},
		{errors.Join(errors.New("x"), ErrBackupNotReady), unix.EAGAIN},
		{fmt.Errorf("switch: %w: states", verbs.ErrQPState), unix.EBUSY},
		{errors.New("other"), unix.EIO},
		{errors.Join(errors.New("x"), unix.ENOMEM), unix.ENOMEM},
	} {
		if got := switchErrno(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}
