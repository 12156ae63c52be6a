package kv

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// OpenURL opens the store that a SHIFT_KV value names:
//
//	redis://[[user]:password@]host[:port][/db]   Redis (NewRedis); rediss:// for TLS
//	dir:PATH                                       Dir on the existing directory PATH
//
// job and timeout are passed on as the backend's Job and Timeout (see RedisOptions). An
// empty or unknown form is refused with EINVAL.
func OpenURL(ctx context.Context, spec, job string, timeout time.Duration) (Store, error) {
	switch {
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		return NewRedis(ctx, spec, RedisOptions{Job: job, Timeout: timeout})
	case strings.HasPrefix(spec, "dir:"):
		return NewDir(strings.TrimPrefix(spec, "dir:"), DirOptions{Job: job, Timeout: timeout})
	}
	shown := spec
	if i := strings.Index(shown, "@"); i >= 0 {
		shown = "…" + shown[i:] // may hold credentials
	}
	return nil, fmt.Errorf("kv: open %q: want redis://, rediss:// or dir:PATH: %w", shown, unix.EINVAL)
}
