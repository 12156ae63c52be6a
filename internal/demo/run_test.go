package demo

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// shortConfig is a 1.5 s run with the failure at 0.5 s and the recovery at 1 s, and an RC
// timeout of 16.8 ms per try (about 134 ms to RETRY_EXC_ERR): the baseline dies well inside
// the run, and a healthy path on a loaded machine does not run out of retries.
func shortConfig() Config {
	return Config{Duration: 1500 * time.Millisecond, FailAt: 500 * time.Millisecond, RecoverAt: time.Second, Timeout: 12}
}

type leakMark struct{ goroutines, fds int }

func markLeaks(t *testing.T) leakMark {
	return leakMark{runtime.NumGoroutine(), countFDs(t)}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count file descriptors: %v", err)
	}
	return len(ents)
}

// checkNoLeaks waits (bounded) for the goroutine count to come back to before, and checks
// that the run closed every file descriptor it opened (the emulated uverbs files included).
func checkNoLeaks(t *testing.T, m leakMark) {
	t.Helper()
	if n := countFDs(t); n > m.fds {
		var names []string
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			names = append(names, e.Name()+"→"+l)
		}
		t.Errorf("%d file descriptors open after the run, %d before: %v", n, m.fds, names)
	}
	before := m.goroutines
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after the run, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProviderRunDiesAtTheFailure(t *testing.T) {
	before := markLeaks(t)
	cfg := shortConfig()
	r, err := Run(context.Background(), cfg, ModeProvider, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, before)
	t.Log(r.Verdict())
	if r.BytesVerified() == 0 || r.MsgsVerified() == 0 {
		t.Fatalf("nothing verified before the failure: %s", r.Verdict())
	}
	for _, s := range r.Streams {
		if s.BytesVerified == 0 {
			t.Errorf("stream %s verified nothing", s.Name)
		}
	}
	errs := r.Errors()
	if len(errs) == 0 {
		t.Fatalf("the link failure was not seen by the application: %s", r.Verdict())
	}
	var retryExc bool
	for _, e := range errs {
		if e.Status == verbs.WCSuccess {
			t.Errorf("application error that is not an error completion (verification or post failure): %v", e)
		}
		if e.At < cfg.FailAt {
			t.Errorf("error before the failure was injected: %v", e)
		}
		retryExc = retryExc || e.Status == verbs.WCRetryExcErr && e.Side == "sender"
	}
	if !retryExc {
		t.Errorf("no RETRY_EXC_ERR at a sender: %v", errs)
	}
	if len(r.Events) != 2 || !strings.Contains(r.Events[0].What, "down") || !strings.Contains(r.Events[1].What, "up") {
		t.Errorf("events %v", r.Events)
	}
	// The baseline stays dead: nothing is verified in any interval after the last error.
	last := errs[len(errs)-1].At
	for _, s := range r.Samples {
		if s.At-s.Span > last && (s.Bytes[0] != 0 || s.Bytes[1] != 0) {
			t.Errorf("traffic verified at %v, after the application's last error at %v", s.At, last)
		}
	}
	if n := len(r.Samples); n < 10 {
		t.Errorf("%d samples in a 1.5 s run at 100 ms", n)
	}
	if !strings.Contains(r.Verdict(), "errors seen by the application") {
		t.Errorf("verdict %q", r.Verdict())
	}
}

func TestShiftRunSurvivesTheFailure(t *testing.T) {
	// Longer than the baseline's run: the fallback (drain, KV lookups, handshake over the
	// backup NICs) must finish inside the run, and a loaded machine can stall it for a while.
	// perftest's timeout (about 0.54 s to the error that starts the fallback), so that the
	// backup path, healthy but slow on a loaded machine, never runs out of retries.
	cfg := Config{Duration: 4 * time.Second, FailAt: 500 * time.Millisecond, RecoverAt: 3 * time.Second, Timeout: 14}
	before := markLeaks(t)
	r, err := Run(context.Background(), cfg, ModeShift, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, before)
	t.Log(r.Verdict())
	t.Log(r.Stack)
	if errs := r.Errors(); len(errs) != 0 {
		t.Fatalf("application saw %d errors with SHIFT: %v", len(errs), errs)
	}
	// After the failure the traffic is verified again and goes through the backup NIC.
	var after, nic1 uint64
	for _, s := range r.Samples {
		if s.At-s.Span >= cfg.FailAt {
			after += s.Bytes[0] + s.Bytes[1]
			nic1 += s.Bytes[3]
		}
	}
	for _, s := range r.Streams {
		if s.MsgsVerified == 0 {
			t.Errorf("stream %s verified nothing", s.Name)
		}
	}
	if after == 0 || nic1 == 0 {
		t.Fatalf("after the failure: %d bytes verified, %d bytes through NIC1: %s", after, nic1, r.Verdict())
	}
	if !strings.Contains(r.Stack, "failover: ") || strings.HasPrefix(r.Stack, "failover: 0 QP fallbacks") {
		t.Errorf("failover counters: %q", r.Stack)
	}
}

func TestMainWritesOutputs(t *testing.T) {
	dir := t.TempDir()
	var out, errw strings.Builder
	code := Main([]string{"-tools", "off", "-mode", "provider", "-duration", "600ms", "-fail-at", "200ms", "-recover-at", "400ms",
		"-fail-host", "1", "-timeout", "10", "-out", dir, "-quiet"}, &out, &errw)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errw.String())
	}
	for _, f := range []string{"timeline.csv", "timeline.svg", "timeline.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The receivers' NIC failing kills the baseline too: no ACK comes back.
	if !strings.Contains(out.String(), "host 1 NIC0 link down") || !strings.Contains(out.String(), "errors seen by the application (first:") {
		t.Errorf("receiver-side failure not reported as an application error:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "verdict provider: ") {
		t.Errorf("no verdict line:\n%s", out.String())
	}
	if code := Main([]string{"-mode", "nonsense"}, &out, &errw); code != 2 {
		t.Errorf("bad mode: exit %d", code)
	}
	if code := Main([]string{"-fail-host", "2"}, &out, &errw); code != 2 {
		t.Errorf("fail host 2: exit %d", code)
	}
	if code := Main([]string{"-fail-at", "2s", "-recover-at", "1s"}, &out, &errw); code != 2 {
		t.Errorf("recovery before failure: exit %d", code)
	}
	if code := Main([]string{"-tools", "maybe"}, &out, &errw); code != 2 {
		t.Errorf("-tools maybe: exit %d", code)
	}
}

func TestBrokenVerdict(t *testing.T) {
	dead := []StreamResult{{Name: "SEND", Errors: []AppError{{What: "x", Status: verbs.WCRetryExcErr}}}}
	for _, c := range []struct {
		r    Result
		want bool
	}{
		{Result{Mode: ModeProvider, Streams: dead}, false},
		{Result{Mode: ModeShift, Streams: dead}, true},
		{Result{Mode: ModeShift, Streams: []StreamResult{{Name: "SEND", MsgsVerified: 3}}}, false},
	} {
		if got := broken(&c.r); got != c.want {
			t.Errorf("%s run with %d errors: broken %v, want %v", c.r.Mode, len(c.r.Errors()), got, c.want)
		}
	}
}

// TestShiftWatchRunFallsBackAtTheLinkEvent: with the default NIC's link events read, the
// traffic reaches the backup NIC within a couple of sampling intervals of the link's down,
// well inside the RC retry timeout (about 0.54 s at timeout 14), and the application sees no
// error.
func TestShiftWatchRunFallsBackAtTheLinkEvent(t *testing.T) {
	cfg := Config{Duration: 3 * time.Second, FailAt: 500 * time.Millisecond, RecoverAt: 2 * time.Second, Timeout: 14}
	r, err := Run(context.Background(), cfg, ModeShiftWatch, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.Verdict())
	if errs := r.Errors(); len(errs) != 0 {
		t.Fatalf("application saw %d errors: %v", len(errs), errs)
	}
	on, ok := r.OnBackupAt()
	if !ok {
		t.Fatalf("no traffic on the backup NIC: %s", r.Stack)
	}
	if gap := on - cfg.FailAt; gap > 500*time.Millisecond {
		t.Errorf("traffic on the backup %v after the down, want the link event's speed (well under the RC timeout)", gap)
	}
	if notes := strings.Join(r.Notes(), "\n"); !strings.Contains(notes, "found by the link-down event") {
		t.Errorf("notes:\n%s", notes)
	}
}
