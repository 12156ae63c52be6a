package failover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/shift-rdma/shift/internal/rundir"
)

// ErrBadStatus is wrapped by ReadStatusDir's complaints about a status file it could not
// use (malformed, another version, naming another process).
var ErrBadStatus = errors.New("failover: unusable status file")

// maxStatusSize bounds what a reader takes from one status file.
const maxStatusSize = 16 << 20

// ReadStatusDir reads the status files of the live SHIFT processes in dir, a runtime
// directory of user uid (rundir.Path, rundir.Candidates), sorted by pid and context. It
// never waits for a writer: a file is replaced by a rename, so a reader opens a complete one.
// A file of a process that is gone (its pid is free, or names a process started at another
// time) is stale: it is skipped, and removed when dir is the caller's own (uid is the
// caller's effective uid). The directory and each file must belong to uid and let no other
// user write them; links are not followed (rundir.ErrUnsafe). Files that cannot be used are
// skipped and reported in the error, which joins one error per file; the statuses read are
// returned with it.
func ReadStatusDir(dir string, uid int) ([]ProcessStatus, error) {
	if err := rundir.Check(dir, uid); err != nil {
		return nil, fmt.Errorf("failover: read status: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failover: read status: %w", err)
	}
	own := uid == os.Geteuid()
	var out []ProcessStatus
	var errs []error
	for _, e := range ents {
		kind, pid, start, tmp, ok := rundir.ParseName(e.Name())
		if !ok {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !rundir.Alive(pid, start) {
			if own {
				_ = os.Remove(path) // stale; gone already if another reader was first
			}
			continue
		}
		if kind != "status" || tmp {
			continue
		}
		s, err := readStatusFile(path, uid, pid, start)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the context closed in between
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ProcessStatus) int {
		if a.PID != b.PID {
			return a.PID - b.PID
		}
		return int(a.Seq) - int(b.Seq)
	})
	return out, errors.Join(errs...)
}

// readStatusFile reads one status file of the process pid started at start.
func readStatusFile(path string, uid, pid int, start uint64) (ProcessStatus, error) {
	f, err := rundir.Open(path, os.O_RDONLY, uid)
	if err != nil {
		return ProcessStatus{}, fmt.Errorf("failover: read status: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStatusSize+1))
	if err != nil {
		return ProcessStatus{}, fmt.Errorf("failover: read status %s: %w", path, err)
	}
	if len(b) > maxStatusSize {
		return ProcessStatus{}, fmt.Errorf("failover: read status %s: larger than %d bytes: %w", path, maxStatusSize, ErrBadStatus)
	}
	var s ProcessStatus
	if err := json.Unmarshal(b, &s); err != nil {
		return ProcessStatus{}, fmt.Errorf("failover: read status %s: %w: %w", path, ErrBadStatus, err)
	}
	if s.Version != StatusVersion {
		return ProcessStatus{}, fmt.Errorf("failover: read status %s: version %d, not %d: %w", path, s.Version, StatusVersion, ErrBadStatus)
	}
	if s.PID != pid || s.Start != start {
		return ProcessStatus{}, fmt.Errorf("failover: read status %s: names process %d started at %d: %w", path, s.PID, s.Start, ErrBadStatus)
	}
	return s, nil
}
