package kv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Mem is an in-process Store: a map under a mutex. Every host of an in-process cluster shares
// one Mem. SetDown simulates an unreachable store, for fail-closed tests.
type Mem struct {
	mu    sync.Mutex
	m     map[string][]byte
	down  atomic.Bool
	gets  atomic.Uint64
	lists atomic.Uint64
}

// NewMem returns an empty in-process store.
func NewMem() *Mem { return &Mem{m: map[string][]byte{}} }

// SetDown makes every later operation fail with ErrUnavailable (down) or work again.
func (s *Mem) SetDown(down bool) { s.down.Store(down) }

// Gets is the number of Get calls served or refused (to check caching).
func (s *Mem) Gets() uint64 { return s.gets.Load() }

// Put stores a copy of value under key.
func (s *Mem) Put(ctx context.Context, key string, value []byte) error {
	if err := s.check(ctx, "put", key); err != nil {
		return err
	}
	s.mu.Lock()
	s.m[key] = append([]byte(nil), value...)
	s.mu.Unlock()
	return nil
}

// Get returns a copy of the value under key.
func (s *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	if err := s.check(ctx, "get", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	v, ok := s.m[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("kv: get %q: %w", key, ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}

// List returns copies of the entries whose key starts with prefix, sorted (Lister).
func (s *Mem) List(ctx context.Context, prefix string) ([]Entry, error) {
	s.lists.Add(1)
	if err := s.check(ctx, "list", prefix); err != nil {
		return nil, err
	}
	var out []Entry
	s.mu.Lock()
	for k, v := range s.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Entry{Key: k, Value: append([]byte(nil), v...)})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Lists is the number of List calls served or refused.
func (s *Mem) Lists() uint64 { return s.lists.Load() }

// Delete removes key (absent keys are not an error).
func (s *Mem) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
	return nil
}

// Close releases nothing; the store stays usable (it is shared by the hosts of a test).
func (s *Mem) Close() error { return nil }

func (s *Mem) check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kv: %s %q: %w: %w", op, key, ErrUnavailable, err)
	}
	if s.down.Load() {
		return fmt.Errorf("kv: %s %q: %w: store marked down", op, key, ErrUnavailable)
	}
	return nil
}
