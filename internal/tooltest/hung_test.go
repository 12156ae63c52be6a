package tooltest

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHungReport: a program killed at its guard is reported with where its threads waited
// (and their backtraces where gdb is installed).
func TestHungReport(t *testing.T) {
	p := startProc(t, "sleep", exec.Command("sleep", "600"))
	_, err := p.Wait(100 * time.Millisecond)
	if err == nil {
		t.Fatal("sleep 600 ended within 100 ms")
	}
	msg := err.Error()
	if !strings.Contains(msg, "killed after") || !regexp.MustCompile(`tid \d+ sleep: S, wchan \S+, syscall \S`).MatchString(msg) {
		t.Fatalf("no thread line for the sleeping program in:\n%s", msg)
	}
	if _, lookErr := exec.LookPath("gdb"); lookErr == nil && !strings.Contains(msg, "--- gdb") {
		t.Fatalf("gdb is installed but no backtrace section in:\n%s", msg)
	}
	if !p.Done() {
		t.Fatal("the program is still running after Wait's kill")
	}
	t.Logf("%s", msg)
}

func TestThreadState(t *testing.T) {
	for stat, want := range map[string]string{
		"123 (ib_send_bw) S 1 2 3": "S",
		"7 (a) b) (c) D 0":         "D",
		"9 (x)":                    "?",
		"garbage":                  "?",
	} {
		if got := threadState(stat); got != want {
			t.Errorf("threadState(%q) = %q, want %q", stat, got, want)
		}
	}
}
