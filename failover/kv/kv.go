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
