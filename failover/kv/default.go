package kv

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/shift-rdma/shift/internal/rundir"
)

// DefaultDirPath is where the embedded default store of processes on one host lives when no
// store is named (SHIFT_KV unset): kv/ in runDir, the user's runtime directory of package
// rundir ("": rundir.Default, /dev/shm/shift-<uid>; the edges pass $XDG_RUNTIME_DIR/shift
// where XDG_RUNTIME_DIR is set, rundir.Path).
func DefaultDirPath(runDir string) string {
	if runDir == "" {
		runDir = rundir.Default()
	}
	return filepath.Join(runDir, "kv")
}

// PrivateDir creates dir and its parent as 0700 directories where missing and checks that
// both belong to the caller and let no other user write: another local user must not be
// able to plant or read attribute entries there, nor swap the directory for a link. It
// returns the directory, ready for NewDir.
func PrivateDir(dir string) (string, error) {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := rundir.Ensure(d); err != nil {
			return "", fmt.Errorf("kv: private dir: %w", err)
		}
	}
	return dir, nil
}

// OpenDefault opens the store an edge configures with one setting (SHIFT_KV): spec as
// OpenURL takes it (redis://, rediss://, dir:PATH), or, when spec is empty, the embedded
// default for processes on one host: a directory store in PrivateDir(DefaultDirPath(runDir)).
func OpenDefault(ctx context.Context, spec, job, runDir string) (Store, error) {
	if spec != "" {
		return OpenURL(ctx, spec, job, 0)
	}
	dir, err := PrivateDir(DefaultDirPath(runDir))
	if err != nil {
		return nil, err
	}
	return NewDir(dir, DirOptions{Job: job})
}
