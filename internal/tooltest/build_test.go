package tooltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMakefileBuildsAlike: the Makefile builds the plugin, the emulated kernel library and the
// preload object with the flags the tests build them with.
func TestMakefileBuildsAlike(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":="); ok {
			vars[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	for _, c := range []struct {
		v    string
		want []string
	}{
		{"PLUGIN_LDFLAGS", BuildFlags},
		{"KERNEL_LDFLAGS", KernelFlags},
	} {
		got := []string{"-buildmode=c-shared", "-ldflags=" + vars[c.v]}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("Makefile %s differs from the tests' flags (-tests +Makefile):\n%s", c.v, d)
		}
	}
	if d := cmp.Diff(PreloadFlags, strings.Fields(vars["PRELOAD_CFLAGS"])); d != "" {
		t.Errorf("Makefile PRELOAD_CFLAGS differs from the tests' flags (-tests +Makefile):\n%s", d)
	}
}
