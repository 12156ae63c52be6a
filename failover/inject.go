package failover

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Failure injection and active switching through shared memory (paper §5.1(3), §4.4): with
// SHIFT_INJECT_SHM=1 (or Options.InjectFile) the library maps a 64-byte file, by default
// /dev/shm/shift-<pid>, that another process writes: shiftctl inject to arm a fault, shiftctl
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
//
// Injection: writers store the QPN first, then n. Context.Inject writes the same words.
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

// defaultInjectFile is /dev/shm/shift-<pid>.
func defaultInjectFile() string { return fmt.Sprintf("/dev/shm/shift-%d", os.Getpid()) }

// mapInjectFile maps path (creating it, zeroed, if needed) or takes another reference.
func mapInjectFile(path string) (*injectShared, error) {
	injectMu.Lock()
	defer injectMu.Unlock()
	if s := injectFiles[path]; s != nil {
		s.refs++
		return s, nil
	}
	own := false
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if os.IsNotExist(err) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		own = err == nil
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
	s := &injectShared{path: path, mem: mem, refs: 1, own: own, ctl: startControl(mem)}
	injectFiles[path] = s
	return s, nil
}

func (s *injectShared) release() error {
	injectMu.Lock()
	defer injectMu.Unlock()
	s.refs--
	if s.refs > 0 {
		return nil
	}
	delete(injectFiles, s.path)
	s.ctl.close() // before the unmap: the watcher reads the mapping
	err := unix.Munmap(s.mem)
	if s.own {
		if rerr := os.Remove(s.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
