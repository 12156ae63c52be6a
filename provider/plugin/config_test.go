package main

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover"
)

func TestParseStatusInterval(t *testing.T) {
	for s, want := range map[string]time.Duration{"off": -1, "0": -1, "250ms": 250 * time.Millisecond, "5s": 5 * time.Second} {
		if d, err := parseStatusInterval(s); err != nil || d != want {
			t.Errorf("%q: %v, %v; want %v", s, d, err, want)
		}
	}
	for _, s := range []string{"", "-1s", "1", "soon"} {
		if d, err := parseStatusInterval(s); err == nil {
			t.Errorf("%q accepted as %v", s, d)
		}
	}
}

func TestParseCQWatchdog(t *testing.T) {
	for s, want := range map[string]time.Duration{"off": -1, "0": -1, "2s": 2 * time.Second, "500ms": 500 * time.Millisecond} {
		if d, err := parseCQWatchdog(s); err != nil || d != want {
			t.Errorf("%q: %v %v, want %v", s, d, err, want)
		}
	}
	for _, s := range []string{"", "-1s", "fast", "10"} {
		if d, err := parseCQWatchdog(s); err == nil {
			t.Errorf("%q accepted as %v", s, d)
		}
	}
}

func TestParseLinkWatch(t *testing.T) {
	for s, want := range map[string][2]bool{"": {false, false}, "1": {true, false}, "0": {false, true}, "off": {false, true}} {
		if req, off, err := parseLinkWatch(s); err != nil || [2]bool{req, off} != want {
			t.Errorf("%q: %v %v %v, want %v", s, req, off, err, want)
		}
	}
	for _, s := range []string{"yes", "2", "on "} {
		if _, _, err := parseLinkWatch(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// The recovery settings the plugin reads for the library.
func TestRecoveryEnv(t *testing.T) {
	if d, err := failover.ParseProbeInterval("25ms"); err != nil || d != 25*time.Millisecond {
		t.Errorf("25ms: %v %v", d, err)
	}
	for _, s := range []string{"0", "-1s", "soon"} {
		if _, err := failover.ParseProbeInterval(s); err == nil {
			t.Errorf("SHIFT_PROBE_INTERVAL %q accepted", s)
		}
	}
	if n, d, err := failover.ParseFenceAfter("8,2ms"); err != nil || n != 8 || d != 2*time.Millisecond {
		t.Errorf("8,2ms: %d %v %v", n, d, err)
	}
}
