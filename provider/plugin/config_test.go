package main

import (
	"testing"
	"time"
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
