package kv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/shift-rdma/shift/internal/rundir"
	"golang.org/x/sys/unix"
)

// DefaultDirPath is where the embedded default store of processes on one host lives when no
// SHIFT_KV is set: $XDG_RUNTIME_DIR/shift/kv where XDG_RUNTIME_DIR is set, else
// /dev/shm/shift-<uid>/kv (the runtime directory of package rundir). getenv reads the
// environment.
func DefaultDirPath(getenv func(string) string) string {
	return filepath.Join(rundir.Path(getenv), "kv")
}

// PrivateDir creates dir and its parent as 0700 directories where missing and checks that
// both belong to the caller and let no other user write: another local user must not be
// able to plant or read attribute entries there, nor swap the directory for a link. It
// returns the directory, ready for NewDir.
func PrivateDir(dir string) (string, error) {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return "", fmt.Errorf("kv: private dir %s: %w", d, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return "", fmt.Errorf("kv: private dir %s: %w", d, err)
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return "", fmt.Errorf("kv: private dir %s: not a directory (a link?): %w", d, syscall.ENOTDIR)
		case int(st.Uid) != os.Getuid():
			return "", fmt.Errorf("kv: private dir %s: owned by uid %d, not by this user (%d): %w", d, st.Uid, os.Getuid(), syscall.EPERM)
		case st.Mode&0o022 != 0:
			return "", fmt.Errorf("kv: private dir %s: mode %o lets other users write: %w", d, st.Mode&0o777, syscall.EPERM)
		}
	}
	return dir, nil
}

// OpenDefault opens the store an edge configures with one setting (SHIFT_KV): spec as
// OpenURL takes it (redis://, rediss://, dir:PATH), or, when spec is empty, the embedded
// default for processes on one host: a directory store in PrivateDir(DefaultDirPath(getenv)).
func OpenDefault(ctx context.Context, spec, job string, getenv func(string) string) (Store, error) {
	if spec != "" {
		return OpenURL(ctx, spec, job, 0)
	}
	dir, err := PrivateDir(DefaultDirPath(getenv))
	if err != nil {
		return nil, err
	}
	return NewDir(dir, DirOptions{Job: job})
}
