package vmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMain fails the package if any QEMU started by a test is still running afterwards.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := qemuChildren(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "vmtest: QEMU processes left running after the tests: %v\n", left)
		code = 1
	}
	os.Exit(code)
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
