package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoCommand(t *testing.T) {
	var out, errw strings.Builder
	if code := demoMain([]string{"-mode", "sideways"}, &out, &errw); code != 2 {
		t.Fatalf("bad mode: exit %d", code)
	}
	dir := t.TempDir()
	out.Reset()
	code := demoMain([]string{"-tools", "off", "-mode", "provider", "-duration", "400ms", "-fail-at", "150ms", "-recover-at", "300ms",
		"-timeout", "12", "-quiet", "-out", dir}, &out, &errw)
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out.String(), errw.String())
	}
	if !strings.Contains(out.String(), "verdict provider: ") {
		t.Fatalf("no verdict:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "timeline.png")); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(demoUsage, "  demo ") {
		t.Fatalf("usage line %q", demoUsage)
	}
}
