// Package rundir is the per-user runtime directory in which SHIFT keeps what processes of one
// user share on a host: each process's control file (failure injection and active switching,
// package failover) and the embedded KV store. Another local user must not be able to steer,
// stall or damage a SHIFT process through it, so the directory is 0700 and its owner and mode
// are verified on every use, files are created with O_EXCL|O_NOFOLLOW|O_CLOEXEC and checked
// with fstat after opening, and a process's file is named by its pid and start time, so a
// file left by a dead process is never taken for a live one's, pid reuse included.
package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is wrapped by every refusal of a directory or file another user could control.
var ErrUnsafe = errors.New("rundir: not private to its user")

// Path is the runtime directory of the calling user: $XDG_RUNTIME_DIR/shift where
// XDG_RUNTIME_DIR is set, else Default. getenv reads the environment; only SHIFT's edges
// (the plugin, shiftctl, the demo) call it, the libraries take the directory as an option.
func Path(getenv func(string) string) string {
	if x := getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "shift")
	}
	return Default()
}

// Default is the runtime directory of the calling user without XDG_RUNTIME_DIR:
// /dev/shm/shift-<uid>. The libraries use it where their options name no directory.
func Default() string { return ShmPath(os.Geteuid()) }

// ShmPath is the runtime directory of uid under /dev/shm, used where XDG_RUNTIME_DIR is unset.
func ShmPath(uid int) string { return filepath.Join("/dev/shm", fmt.Sprintf("shift-%d", uid)) }

// Candidates are the directories a process of uid may have used (its XDG_RUNTIME_DIR is not
// known to another process): the caller's own Path first when it is that user, then
// /run/user/<uid>/shift (systemd's XDG_RUNTIME_DIR) and /dev/shm/shift-<uid>.
func Candidates(uid int, getenv func(string) string) []string {
	var out []string
	if uid == os.Geteuid() {
		out = append(out, Path(getenv))
	}
	for _, d := range []string{filepath.Join("/run/user", strconv.Itoa(uid), "shift"), ShmPath(uid)} {
		if len(out) == 0 || out[0] != d {
			out = append(out, d)
		}
	}
	return out
}

// Ensure creates dir as a 0700 directory where missing and verifies it (Check with the
// caller's uid). Its parent must exist.
func Ensure(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("rundir: create %s: %w", dir, err)
	}
	return Check(dir, os.Geteuid())
}

// Check verifies that dir is a directory (not a link), owned by uid, that no other user
// may write.
func Check(dir string, uid int) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("rundir: %s: %w", dir, err)
	}
	return checkStat(dir, &st, unix.S_IFDIR, uid)
}

// checkStat is the check of Check and Open. Its refusals wrap ErrUnsafe and an errno: ENOTDIR
// or ELOOP for the wrong kind of file (a link, for instance), EPERM for another owner or
// write access for others.
func checkStat(path string, st *unix.Stat_t, typ uint32, uid int) error {
	switch {
	case st.Mode&unix.S_IFMT != typ:
		what, errno := "a directory", unix.ENOTDIR
		if typ == unix.S_IFREG {
			what, errno = "a regular file", unix.ELOOP
		}
		return fmt.Errorf("rundir: %s is not %s (a link or another kind of file): %w: %w", path, what, ErrUnsafe, errno)
	case int(st.Uid) != uid:
		return fmt.Errorf("rundir: %s belongs to uid %d, not to uid %d: %w: %w", path, st.Uid, uid, ErrUnsafe, unix.EPERM)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("rundir: %s has mode %o: other users may write it: %w: %w", path, st.Mode&0o777, ErrUnsafe, unix.EPERM)
	}
	return nil
}

// Create creates name in dir (which Ensure checked) as a new 0600 file, failing if anything
// is there already, and verifies what it opened.
func Create(dir, name string) (*os.File, error) {
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("rundir: create %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkFile(f, os.Geteuid()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Open opens the regular file path without following a link and verifies, on what it opened,
// that uid owns it and no other user may write it. flag is os.O_RDONLY or os.O_RDWR.
func Open(path string, flag, uid int) (*os.File, error) {
	fd, err := unix.Open(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("rundir: open %s: a symbolic link: %w: %w", path, ErrUnsafe, unix.ELOOP)
	}
	if err != nil {
		return nil, fmt.Errorf("rundir: open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkFile(f, uid); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkFile(f *os.File, uid int) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("rundir: fstat %s: %w", f.Name(), err)
	}
	return checkStat(f.Name(), &st, unix.S_IFREG, uid)
}

// ProcStart is the start time of process pid in clock ticks since boot (field 22 of
// /proc/<pid>/stat): with the pid it names one process for the life of the system.
func ProcStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("rundir: process %d: %w", pid, err)
	}
	s := string(b)
	// The command name (field 2) is in parentheses and may hold spaces and parentheses.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("rundir: /proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	const startField = 22 - 3 // fields counted from 3 (state) after the name
	if len(f) <= startField {
		return 0, fmt.Errorf("rundir: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[startField], 10, 64)
}

// ProcUID is the real uid of process pid.
func ProcUID(pid int) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d", pid), &st); err != nil {
		return 0, fmt.Errorf("rundir: process %d: %w", pid, err)
	}
	return int(st.Uid), nil
}

// ControlName is the name of the control file of the process pid started at start.
func ControlName(pid int, start uint64) string { return fmt.Sprintf("ctl-%d-%d", pid, start) }

// StatusName is the name of the status file of context seq (a number the process gives each
// context it opens) of the process pid started at start; the process writes it as
// StatusName(...)+TempSuffix and renames that over it.
func StatusName(pid int, start uint64, seq uint64) string {
	return fmt.Sprintf("status-%d-%d-%d", pid, start, seq)
}

// TempSuffix ends the name of a file being written, before it is renamed over its final name.
const TempSuffix = ".tmp"

// ParseName parses the name of a file of the runtime directory named by a process (a
// control file, a status file, or one of them being written): its kind ("ctl" or
// "status"), the process's pid and start time, and whether it is a temporary file.
func ParseName(name string) (kind string, pid int, start uint64, tmp, ok bool) {
	base, tmp := strings.CutSuffix(name, TempSuffix)
	p := strings.Split(base, "-")
	switch {
	case len(p) == 3 && p[0] == "ctl":
	case len(p) == 4 && p[0] == "status":
		if _, err := strconv.ParseUint(p[3], 10, 64); err != nil {
			return "", 0, 0, false, false
		}
	default:
		return "", 0, 0, false, false
	}
	pid, err1 := strconv.Atoi(p[1])
	start, err2 := strconv.ParseUint(p[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return "", 0, 0, false, false
	}
	return p[0], pid, start, tmp, true
}

// Alive reports whether process pid runs and was started at start (not a process that
// reused the pid).
func Alive(pid int, start uint64) bool {
	now, err := ProcStart(pid)
	return err == nil && now == start
}

// RemoveStale removes the files in dir (which Ensure checked) that processes name (control
// and status files, and their temporary files) of processes that no longer run, or whose
// pid now names a process started at another time. It returns how many it removed.
func RemoveStale(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("rundir: %w", err)
	}
	n := 0
	for _, e := range ents {
		_, pid, start, _, ok := ParseName(e.Name())
		if !ok || Alive(pid, start) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			n++
		}
	}
	return n, nil
}
