// Package kv is SHIFT's attribute store: the table in which every host publishes, for each of
// its default MRs and QPs, the attributes of their shadows on the backup NIC
// (<default MR attrs → backup MR attrs>, <default QP route attrs → backup QP route attrs>), so
// that a peer can rewrite remote keys and connect its backup QP. Store is the interface the
// failover layer uses; Mem is the in-process backend (tests, one-process demos); other files
// of this package add the Redis and one-host multi-process backends.
//
// The store is on the failover path: an unreachable store or a missing entry must surface as
// an error (ErrNotFound, ErrUnavailable) that the caller turns into a failed fallback (fail
// closed), never as a guessed value.
package kv

import (
	"context"
	"errors"
)

var (
	// ErrNotFound: no entry under the key (not published yet, or never).
	ErrNotFound = errors.New("kv: key not found")
	// ErrUnavailable: the store could not be reached or refused the operation.
	ErrUnavailable = errors.New("kv: store unavailable")
)

// Store is a string-keyed store of small binary values. Implementations are safe for
// concurrent use. Get returns an error wrapping ErrNotFound for a missing key and one
// wrapping ErrUnavailable when the store cannot answer; Put overwrites.
type Store interface {
	Put(ctx context.Context, key string, value []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	Close() error
}

// Entry is one key and its value, as List returns them.
type Entry struct {
	Key   string
	Value []byte
}

// Lister is implemented by the stores that can enumerate their keys (Mem, Dir, Redis): List
// returns every entry whose key starts with prefix (keys as Get takes them, relative to the
// store's job namespace), sorted by key. An entry deleted while the listing runs may be
// missing or present; an entry that exists for the whole listing is returned. A store that
// cannot answer fails the whole listing with an error wrapping ErrUnavailable: a partial
// listing is never returned as a complete one.
//
// The failover layer lists a peer's MR entries to cache them before a fallback needs them;
// with a Store that is not a Lister it falls back to Get of each key it misses.
type Lister interface {
	List(ctx context.Context, prefix string) ([]Entry, error)
}
