package kv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shift-rdma/shift/internal/rundir"
	"golang.org/x/sys/unix"
)

// DirOptions tune a Dir store.
type DirOptions struct {
	// Job namespaces the keys as for RedisOptions.Job: "shift/<Job>/" is prepended, and an
	// empty Job stores keys as given.
	Job string
	// Timeout bounds each operation's retries in addition to the caller's context; 0 means
	// DefaultTimeout.
	Timeout time.Duration
}

// dirReadTries bounds how often a read that failed for a reason other than a missing file is
// retried before the store is reported unavailable.
const dirReadTries = 5

// Dir is a Store for several processes of one host with no server (tests, the demo over
// network namespaces): one file per key in a directory that every process opens. A Put
// writes a temporary file in the same directory and renames it over the key's file, so a
// reader sees either the old or the new value, never a partial one. The directory must
// exist: its disappearance makes every operation fail with ErrUnavailable rather than
// report keys as missing.
type Dir struct {
	root    string
	prefix  string
	timeout time.Duration
}

// NewDir opens the store in directory root, which must exist, be a directory of the caller
// (not a link) and let no other user write it (rundir.Check; rundir.ErrUnsafe otherwise).
func NewDir(root string, opts DirOptions) (*Dir, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("kv: dir %s: open: %w: %w", root, ErrUnavailable, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("kv: dir %s: open: %w: %w", root, ErrUnavailable, unix.ENOTDIR)
	}
	// Another local user who could write the root (or swap it for a link) could plant
	// attribute entries that steer this user's backup connections.
	if err := rundir.Check(root, os.Geteuid()); err != nil {
		return nil, fmt.Errorf("kv: dir %s: open: %w", root, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	prefix, err := jobPrefix(opts.Job)
	if err != nil {
		return nil, fmt.Errorf("kv: dir %s: open: %w", root, err)
	}
	return &Dir{root: root, prefix: prefix, timeout: opts.Timeout}, nil
}

// jobPrefix is the key prefix of a job: "shift/<job>/", or "" for no namespace. A job name
// holding '/' is refused: job "a/b" with key "c" and job "a" with key "b/c" would share an
// entry.
func jobPrefix(job string) (string, error) {
	if job == "" {
		return "", nil
	}
	if strings.ContainsRune(job, '/') {
		return "", fmt.Errorf("job name %q holds '/': %w", job, unix.EINVAL)
	}
	return "shift/" + job + "/", nil
}

// Put stores a copy of value under key, replacing any previous value atomically.
func (d *Dir) Put(ctx context.Context, key string, value []byte) error {
	name, err := d.file("put", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kv: dir %s: put %q: %w: %w", d.root, key, ErrUnavailable, err)
	}
	f, err := os.CreateTemp(d.root, ".tmp-")
	if err != nil {
		return fmt.Errorf("kv: dir %s: put %q: %w: %w", d.root, key, ErrUnavailable, err)
	}
	tmp := f.Name()
	_, werr := f.Write(value)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kv: dir %s: put %q: %w: %w", d.root, key, ErrUnavailable, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kv: dir %s: put %q: %w: %w", d.root, key, ErrUnavailable, err)
	}
	return nil
}

// Get returns the value under key. A missing file is ErrNotFound only while the directory
// itself is there; other read errors are retried a bounded number of times (within the
// timeout) and then reported as ErrUnavailable with their errno.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	name, err := d.file("get", key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	backoff := time.Millisecond
	var last error
	for try := 0; try < dirReadTries; try++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kv: dir %s: get %q: %w: %w", d.root, key, ErrUnavailable, errors.Join(err, last))
		}
		v, err := os.ReadFile(name)
		if err == nil {
			return v, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			if err := d.rootPresent(); err != nil {
				return nil, fmt.Errorf("kv: dir %s: get %q: %w: %w", d.root, key, ErrUnavailable, err)
			}
			return nil, fmt.Errorf("kv: dir %s: get %q: %w", d.root, key, ErrNotFound)
		}
		last = err
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff *= 4
	}
	return nil, fmt.Errorf("kv: dir %s: get %q: %w: %d tries: %w", d.root, key, ErrUnavailable, dirReadTries, last)
}

// Delete removes key; an absent key is not an error while the directory is there.
func (d *Dir) Delete(ctx context.Context, key string) error {
	name, err := d.file("delete", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kv: dir %s: delete %q: %w: %w", d.root, key, ErrUnavailable, err)
	}
	if err := os.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if err := d.rootPresent(); err == nil {
				return nil
			}
		}
		return fmt.Errorf("kv: dir %s: delete %q: %w: %w", d.root, key, ErrUnavailable, err)
	}
	return nil
}

// Purge deletes every key of the store's job. It refuses to run on a store without a Job.
func (d *Dir) Purge(ctx context.Context) error {
	if d.prefix == "" {
		return fmt.Errorf("kv: dir %s: purge: store has no job namespace", d.root)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kv: dir %s: purge: %w: %w", d.root, ErrUnavailable, err)
	}
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return fmt.Errorf("kv: dir %s: purge: %w: %w", d.root, ErrUnavailable, err)
	}
	p := escapeKey(d.prefix)
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), p) {
			if err := os.Remove(filepath.Join(d.root, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kv: dir %s: purge: %w: %w", d.root, ErrUnavailable, err)
	}
	return nil
}

// List returns the entries whose key starts with prefix, sorted (Lister): the directory is
// read once, then each matching file; a file removed between the two (a Delete) is left
// out, any other failure (the directory gone, a read error) fails the listing with
// ErrUnavailable.
func (d *Dir) List(ctx context.Context, prefix string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kv: dir %s: list %q: %w: %w", d.root, prefix, ErrUnavailable, err)
	}
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return nil, fmt.Errorf("kv: dir %s: list %q: %w: %w", d.root, prefix, ErrUnavailable, err)
	}
	var out []Entry
	for _, e := range ents {
		k, ok := unescapeKey(e.Name())
		if !ok || !strings.HasPrefix(k, d.prefix+prefix) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kv: dir %s: list %q: %w: %w", d.root, prefix, ErrUnavailable, err)
		}
		v, err := os.ReadFile(filepath.Join(d.root, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kv: dir %s: list %q: %w: %w", d.root, prefix, ErrUnavailable, err)
		}
		out = append(out, Entry{Key: strings.TrimPrefix(k, d.prefix), Value: v})
	}
	if err := d.rootPresent(); err != nil {
		return nil, fmt.Errorf("kv: dir %s: list %q: %w: %w", d.root, prefix, ErrUnavailable, err)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Close releases nothing: a Dir holds no descriptor between operations.
func (d *Dir) Close() error { return nil }

// file is the path of key's file: the namespaced key escaped into one file name.
func (d *Dir) file(op, key string) (string, error) {
	n := escapeKey(d.prefix + key)
	if n == "" {
		return "", fmt.Errorf("kv: dir %s: %s: empty key: %w", d.root, op, unix.EINVAL)
	}
	if len(n) > 255 {
		return "", fmt.Errorf("kv: dir %s: %s %q: key too long for a file name (%d bytes escaped): %w",
			d.root, op, key, len(n), unix.ENAMETOOLONG)
	}
	return filepath.Join(d.root, n), nil
}

// rootPresent tells a missing key from a missing store.
func (d *Dir) rootPresent() error {
	st, err := os.Stat(d.root)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return unix.ENOTDIR
	}
	return nil
}

// escapeKey maps a key to a file name: letters, digits, '-' and '_' stay, every other byte
// becomes %XX. '.' is escaped too, so no name is "." or ".." and none collides with the
// ".tmp-" files of Put.
func escapeKey(k string) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(k))
	for _, c := range []byte(k) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
	}
	return b.String()
}

// unescapeKey inverts escapeKey; names that escapeKey cannot have produced (Put's ".tmp-"
// files, anything else in the directory) are not keys.
func unescapeKey(name string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '%' && i+2 < len(name):
			hi, ok1 := unhex(name[i+1])
			lo, ok2 := unhex(name[i+2])
			if !ok1 || !ok2 {
				return "", false
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), b.Len() > 0
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
