package vmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

// TestMain fails a passing run if any QEMU started by a test is still running afterwards,
// or if the tests leak goroutines, descriptors or mappings.
func TestMain(m *testing.M) {
	leakcheck.Main(m, leakcheck.Check("QEMU processes left running", func() error {
		if left := qemuChildren(); len(left) > 0 {
			return fmt.Errorf("%v", left)
		}
		return nil
	}))
}

// qemuChildren lists the pids of this process's children whose command is QEMU.
func qemuChildren() []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	self := os.Getpid()
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces, so split after the last ')'.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if ppid == self && strings.Contains(s[:i], "qemu-system") {
			pid, _ := strconv.Atoi(strings.Fields(s)[0])
			pids = append(pids, pid)
		}
	}
	return pids
}
