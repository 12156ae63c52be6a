package vmtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// EnvReport names a file to which the tier appends what it verified (one line per Logf,
// prefixed with the test name), so that `make test` can show it although go test prints
// the logs of passing tests only with -v.
const EnvReport = "SHIFT_VM_REPORT"

// Logf logs like t.Logf and, when SHIFT_VM_REPORT is set, appends the line to that file.
func Logf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	path := os.Getenv(EnvReport)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("vmtest: %s: %v", EnvReport, err)
		return
	}
	defer f.Close()
	var b strings.Builder
	for _, l := range strings.Split(msg, "\n") {
		fmt.Fprintf(&b, "%s: %s\n", t.Name(), l)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		t.Errorf("vmtest: %s: %v", EnvReport, err)
	}
}
