package demo

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestScheduleFlag: -fail-at and -recover-at take a duration, never, or a negative number
// (never), as the help says; a bare positive number is refused with the reason.
func TestScheduleFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{{"5s", 5 * time.Second, true}, {"never", -1, true}, {"-1", -1, true}, {"-2.5", -1, true},
		{"-3s", -1, true}, {"0", 0, false}, {"3", 0, false}, {"soon", 0, false}} {
		var s schedule
		err := s.Set(c.in)
		if (err == nil) != c.ok || c.ok && time.Duration(s) != c.want {
			t.Errorf("Set(%q) = %v, %v; want %v ok %v", c.in, time.Duration(s), err, c.want, c.ok)
		}
	}
	var errw strings.Builder
	if st := Main([]string{"-h"}, io.Discard, &errw); st != 0 || !strings.HasPrefix(errw.String(), "usage: shiftctl demo") {
		t.Errorf("-h: status %d, usage %q", st, errw.String())
	}
	if st := Main([]string{"-fail-at", "3"}, io.Discard, io.Discard); st != 2 {
		t.Errorf("-fail-at 3: status %d, want 2", st)
	}
}

// TestMainQuietOutput: with stdout not a terminal the demo prints no live progress line (no
// \r) and no per-interval table, and its verdict lines come last.
func TestMainQuietOutput(t *testing.T) {
	var out, errw strings.Builder
	st := Main([]string{"-mode", "provider", "-duration", "1s", "-fail-at", "never", "-tools", "off", "-out", t.TempDir()}, &out, &errw)
	if st != 0 {
		t.Fatalf("status %d: %s", st, errw.String())
	}
	s := out.String()
	if strings.Contains(s, "\r") || strings.Contains(s, "Gbit/s") {
		t.Errorf("progress or table on a non-terminal:\n%q", s)
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "verdict provider:") {
		t.Errorf("last line %q, want the verdict", last)
	}
}
