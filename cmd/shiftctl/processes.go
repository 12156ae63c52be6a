package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/internal/rundir"
)

// processReport is what shiftctl status and metrics read of the SHIFT processes of the host:
// one status file per failover context (failover.ReadStatusDir).
type processReport struct {
	Dirs      []string                 `json:"dirs"` // the runtime directories read
	Processes []failover.ProcessStatus `json:"processes"`
	Errors    []string                 `json:"errors,omitempty"` // files or directories not used
}

// statusDirs are the runtime directories to read with the uid each must belong to: the
// caller's own (rundir.Candidates), and as root every user's under /run/user and /dev/shm.
func statusDirs(getenv func(string) string) (dirs []string, uids []int) {
	me := os.Geteuid()
	seen := map[string]bool{}
	add := func(d string, uid int) {
		if !seen[d] {
			seen[d] = true
			dirs, uids = append(dirs, d), append(uids, uid)
		}
	}
	for _, d := range rundir.Candidates(me, getenv) {
		add(d, me)
	}
	if me != 0 {
		return dirs, uids
	}
	var others []string
	for _, pat := range []string{"/run/user/*/shift", "/dev/shm/shift-*"} {
		m, _ := filepath.Glob(pat)
		others = append(others, m...)
	}
	slices.Sort(others)
	for _, d := range others {
		var st unix.Stat_t
		if unix.Lstat(d, &st) == nil && !seen[d] {
			add(d, int(st.Uid)) // rundir.Check refuses a link or a directory others may write
		}
	}
	return dirs, uids
}

// collectProcesses reads the status files of every runtime directory it may read. Stale
// files are removed only from the caller's own directories.
func collectProcesses(getenv func(string) string) processReport {
	rep := processReport{Dirs: []string{}, Processes: []failover.ProcessStatus{}}
	dirs, uids := statusDirs(getenv)
	for i, d := range dirs {
		ps, err := failover.ReadStatusDir(d, uids[i])
		if errors.Is(err, fs.ErrNotExist) && ps == nil {
			continue // no SHIFT process of that user used it
		}
		rep.Dirs = append(rep.Dirs, d)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		rep.Processes = append(rep.Processes, ps...)
	}
	return rep
}
