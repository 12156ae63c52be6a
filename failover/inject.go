package failover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/shift-rdma/shift/internal/rundir"
	"golang.org/x/sys/unix"
)

// Failure injection and active switching through shared memory (paper §5.1(3), §4.4): with
// Options.ControlFile (the edges set it from SHIFT_INJECT_SHM=1) or Options.InjectFile the
// library maps a 64-byte file, by default the process's control file in the user's runtime
// directory (Options.RunDir, package rundir: the edges pass $XDG_RUNTIME_DIR/shift, else
// /dev/shm/shift-<uid>; the file is ctl-<pid>-<start> there), that
// another process of the same user (or root) writes: shiftctl inject to arm a fault, shiftctl
// switch to move a QP to the backup NIC and back. Every word is in native byte order, 8-byte
// aligned in the page-aligned mapping, and read and written with atomic loads and stores:
//
//	offset  0: int64  n, the countdown (the n-th next WR carrying a local key is corrupted;
//	                  0: off)
//	offset  8: uint32 the target QPN of the injection (0: any QP)
//	offset 16: uint32 switch request: the default QPN
//	offset 20: uint32 switch request: the operation (1: to the backup, 2: back to the default)
//	offset 24: uint64 switch request sequence
//	offset 32: uint64 switch done sequence
//	offset 40: int32  switch result: 0 or a unix errno
//	offset 48: uint64 injection request sequence
//	offset 56: uint64 injection done sequence
//
// Injection: writers store the QPN first, then n. Context.Inject writes the same words. The
// fast post does not read them (injgate.go): the watcher closes the send gates of the QPs an
// armed injection may fall on. A writer that must know its arm counts the next WR (shiftctl
// inject, RequestInject) holds flock(LOCK_EX) as for a switch, waits until done == request,
// stores the QPN, n, then request+1, and waits until done catches up; the watcher closes the
// gates before it stores done. A writer that stores only the words is served at the
// watcher's next poll (every 10 ms): WRs posted until then are not counted.
//
// Switching (control.go): a writer holds flock(LOCK_EX) on the file for the whole exchange,
// waits until done == request (no earlier request pending), stores the QPN and the operation,
// then request+1. The library's watcher stores the result, then done = request. Requests
// found pending when a process maps the file are stale and dropped.
//
// A 16-byte file left by an older library is grown to 64 bytes when mapped.

// InjectFileSize is the size of the injection file.
const InjectFileSize = 64

// injectShared is one mapped injection file, shared by the contexts of a process.
type injectShared struct {
	key  string // the path the contexts asked for ("" for the process's own file)
	path string
	mem  []byte
	refs int
	own  bool // created by this process: removed when the last context closes
	ctl  *controlWatcher
}

var (
	injectMu    sync.Mutex
	injectFiles = map[string]*injectShared{}
)

// defaultInjectFile creates the process's control file in the user's runtime directory dir
// ("": rundir.Default, /dev/shm/shift-<uid>; 0700 and verified), named by pid and start
// time, after removing the files of processes that are gone.
func defaultInjectFile(dir string) (string, *os.File, error) {
	if dir == "" {
		dir = rundir.Default()
	}
	if err := rundir.Ensure(dir); err != nil {
		return "", nil, err
	}
	if _, err := rundir.RemoveStale(dir); err != nil {
		return "", nil, err
	}
	start, err := rundir.ProcStart(os.Getpid())
	if err != nil {
		return "", nil, err
	}
	name := rundir.ControlName(os.Getpid(), start)
	f, err := rundir.Create(dir, name)
	if err != nil {
		return "", nil, err
	}
	return f.Name(), f, nil
}

// openInjectFile opens an injection file named by the caller (Options.InjectFile): an
// existing one only if it is a regular file of this user that no other user may write, and
// of a size this library wrote (0, the 16 bytes of an older library, or InjectFileSize),
// never through a link; a new one exclusively, 0600.
func openInjectFile(path string) (f *os.File, own bool, err error) {
	f, err = rundir.Open(path, os.O_RDWR, os.Geteuid())
	if errors.Is(err, fs.ErrNotExist) {
		f, err = rundir.Create(filepath.Dir(path), filepath.Base(path))
		return f, err == nil, err
	}
	if err != nil {
		return nil, false, err
	}
	st, err := f.Stat()
	if err == nil && st.Size() != 0 && st.Size() != 16 && st.Size() != InjectFileSize {
		err = fmt.Errorf("size %d: not a SHIFT injection file (left unchanged): %w", st.Size(), rundir.ErrUnsafe)
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, false, nil
}

// mapInjectFile maps path (creating it, zeroed, if needed; "" is the process's own file in
// the runtime directory runDir, "" for rundir.Default) or takes another reference.
func mapInjectFile(path, runDir string) (*injectShared, error) {
	injectMu.Lock()
	defer injectMu.Unlock()
	if s := injectFiles[path]; s != nil {
		s.refs++
		return s, nil
	}
	key := path
	var f *os.File
	own := true
	var err error
	if path == "" {
		path, f, err = defaultInjectFile(runDir)
	} else {
		f, own, err = openInjectFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("failover: injection file %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(InjectFileSize); err != nil {
		return nil, fmt.Errorf("failover: injection file %s: %w", path, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, InjectFileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("failover: map injection file %s: %w", path, err)
	}
	// One watcher per mapping serves the switch requests of every context sharing it.
	s := &injectShared{key: key, path: path, mem: mem, refs: 1, own: own, ctl: startControl(mem)}
	injectFiles[key] = s
	return s, nil
}

func (s *injectShared) release() error {
	injectMu.Lock()
	defer injectMu.Unlock()
	s.refs--
	if s.refs > 0 {
		return nil
	}
	delete(injectFiles, s.key)
	s.ctl.close() // before the unmap: the watcher reads the mapping
	err := unix.Munmap(s.mem)
	if s.own {
		if rerr := os.Remove(s.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
