package tooltest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// gdbTimeout bounds the debugger's look at a hung program.
const gdbTimeout = 30 * time.Second

// hungReport says where the threads of process pid wait, for a program killed at its guard:
// each thread's name, state, kernel wait channel and system call (/proc), then every
// thread's user-space backtrace when gdb is installed and may attach. A tool that printed its
// result and then hung (the emulated kernel's ib_send_bw with events, once in a full make
// test, 2026-11-30) left nothing to tell where it waited. Best effort: what cannot be read is
// said, and nothing here fails the caller.
func hungReport(pid int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- threads of pid %d:\n", pid)
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintf(&b, "(%v)\n", err)
		return b.String()
	}
	names := make([]string, 0, len(tids))
	for _, t := range tids {
		names = append(names, t.Name())
	}
	sort.Strings(names)
	for _, tid := range names {
		read := func(f string) string {
			v, err := os.ReadFile(filepath.Join(dir, tid, f))
			if err != nil {
				return "?"
			}
			return strings.TrimSpace(string(v))
		}
		fmt.Fprintf(&b, "tid %s %s: %s, wchan %s, syscall %s\n", tid, read("comm"), threadState(read("stat")),
			read("wchan"), read("syscall"))
	}
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		b.WriteString("(no gdb: no user-space backtraces)\n")
		return b.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), gdbTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, gdb, "-p", fmt.Sprint(pid), "-batch", "-nx",
		"-ex", "set pagination off", "-ex", "thread apply all bt").CombinedOutput()
	fmt.Fprintf(&b, "--- gdb (%v):\n%s", err, out)
	return b.String()
}

// threadState is the state letter of a /proc/<pid>/task/<tid>/stat line (the field after
// the parenthesised name, which may itself hold spaces or parentheses).
func threadState(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return "?"
	}
	return stat[i+2 : i+3]
}
