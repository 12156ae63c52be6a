package failover

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Failure injection through shared memory (paper §5.1(3)): with SHIFT_INJECT_SHM=1 (or
// Options.InjectFile) the library maps a 16-byte file, by default /dev/shm/shift-<pid>, that
// another process (shiftctl inject) writes to arm a fault:
//
//	offset 0: int64, native byte order, atomically written: n, the countdown (the n-th next
//	          WR carrying a local key is corrupted; 0: off)
//	offset 8: uint32, native byte order: the target QPN (0: any QP)
//
// Writers store the QPN first, then n. Context.Inject writes the same words.

// InjectFileSize is the size of the injection file.
const InjectFileSize = 16

// injectShared is one mapped injection file, shared by the contexts of a process.
type injectShared struct {
	path string
	mem  []byte
	refs int
	own  bool // created by this process: removed when the last context closes
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
	s := &injectShared{path: path, mem: mem, refs: 1, own: own}
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
	err := unix.Munmap(s.mem)
	if s.own {
		if rerr := os.Remove(s.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
