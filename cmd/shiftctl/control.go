package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/rundir"
)

// openControl opens the control file of process pid for inject and switch: file when given,
// else the ctl-<pid>-<start> file in that user's runtime directory (rundir.Candidates). Only
// the process's own user or root may act on it; the directory and the file must be that
// user's and private to it, and a link is never followed.
func openControl(pid int, file string) (*os.File, error) {
	uid, err := rundir.ProcUID(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("process %d: %w", pid, unix.ESRCH)
	}
	if err != nil {
		return nil, err
	}
	if me := os.Geteuid(); me != 0 && me != uid {
		return nil, fmt.Errorf("process %d belongs to uid %d; uid %d may act only on its own processes (or run as root): %w",
			pid, uid, me, unix.EPERM)
	}
	if file != "" {
		f, err := rundir.Open(file, os.O_RDWR, uid)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open %s: process %d has no injection file (start it with SHIFT_INJECT_SHM=1): %w", file, pid, unix.ENOENT)
		}
		return f, err
	}
	start, err := rundir.ProcStart(pid)
	if err != nil {
		return nil, err
	}
	name := rundir.ControlName(pid, start)
	var tried []string
	var unsafe error
	for _, dir := range rundir.Candidates(uid, os.Getenv) {
		tried = append(tried, dir)
		if err := rundir.Check(dir, uid); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				unsafe = errors.Join(unsafe, err)
			}
			continue
		}
		f, err := rundir.Open(filepath.Join(dir, name), os.O_RDWR, uid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return f, err
	}
	if unsafe != nil {
		return nil, fmt.Errorf("process %d: no usable control file: %w", pid, unsafe)
	}
	return nil, fmt.Errorf("process %d has no control file %s in %s (start it with SHIFT_INJECT_SHM=1): %w",
		pid, name, strings.Join(tried, " or "), unix.ENOENT)
}
