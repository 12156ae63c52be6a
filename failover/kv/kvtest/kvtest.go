// Package kvtest is the conformance test body every kv.Store backend runs (Mem, Dir, Redis):
// the contract the failover layer relies on — values round-trip byte for byte, a missing key
// is ErrNotFound and never ErrUnavailable, a store that cannot answer is ErrUnavailable and
// never ErrNotFound (fail closed), stores of one backend see each other's writes (several
// hosts of a job), and stores of different jobs do not (namespacing).
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
)

// Backend describes the backend under test.
type Backend struct {
	// Open returns a new store of the backend for job. Every store opened through one
	// Backend shares the same data (the same server, directory or Mem), as the hosts of a
	// job do. Open registers the store's cleanup itself.
	Open func(t testing.TB, job string) kv.Store
	// Namespaced says that stores of different jobs are isolated (Dir and Redis with a
	// Job); a backend without namespaces (Mem) skips the isolation test.
	Namespaced bool
	// Break makes the backend unable to answer (server killed, directory removed, Mem
	// marked down). It is called last; nil skips the fail-closed test.
	Break func(t testing.TB)
}

// Run runs the conformance tests as subtests of t. Randomised parts use a seed logged with
// every failure.
func Run(t *testing.T, b Backend) {
	seed := uint64(time.Now().UnixNano())
	t.Run("RoundTrip", func(t *testing.T) { roundTrip(t, b) })
	t.Run("MissingIsNotFound", func(t *testing.T) { missing(t, b) })
	t.Run("OverwriteDelete", func(t *testing.T) { overwriteDelete(t, b) })
	t.Run("SharedBetweenStores", func(t *testing.T) { shared(t, b) })
	t.Run("Cancelled", func(t *testing.T) { cancelled(t, b) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, b, seed) })
	if b.Namespaced {
		t.Run("JobIsolation", func(t *testing.T) { isolation(t, b) })
	}
	t.Run("List", func(t *testing.T) { list(t, b) })
	if b.Break != nil {
		t.Run("FailClosed", func(t *testing.T) { failClosed(t, b) })
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustPut(t testing.TB, s kv.Store, key string, v []byte) {
	t.Helper()
	if err := s.Put(ctx(t), key, v); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

func mustGet(t testing.TB, s kv.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get %q = %x, want %x", key, got, want)
	}
}

func mustMiss(t testing.TB, s kv.Store, key string) {
	t.Helper()
	v, err := s.Get(ctx(t), key)
	if !errors.Is(err, kv.ErrNotFound) || errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("get %q of a missing key = %x, %v; want ErrNotFound only", key, v, err)
	}
	if v != nil {
		t.Fatalf("get %q of a missing key returned a value %x", key, v)
	}
}

// roundTrip: binary values of several sizes (empty, NULs, every byte value, 64 KiB), keys
// with the characters the failover layer uses, and the store keeping its own copy.
func roundTrip(t *testing.T, b Backend) {
	s := b.Open(t, "rt")
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	cases := map[string][]byte{
		"qp/fe800000000000000000000000000001/291": {0, 0, 1, 35},
		"mr/00000000000000000000ffff0a4d0001/7":   {0xde, 0xad, 0xbe, 0xef},
		"empty":                                   {},
		"nul/\x00/in key":                         {0, 0, 0},
		"all-bytes.bin":                           all,
		"big":                                     big,
		"unicode/ключ/*?[]":                       []byte("v"),
	}
	for k, v := range cases {
		in := append([]byte(nil), v...)
		mustPut(t, s, k, in)
		for i := range in {
			in[i] ^= 0xff // the store must not alias the caller's slice
		}
	}
	for k, v := range cases {
		mustGet(t, s, k, v)
	}
	got, err := s.Get(ctx(t), "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 {
		got[0] ^= 0xff // nor hand out its own
		mustGet(t, s, "big", big)
	}
}

func missing(t *testing.T, b Backend) {
	s := b.Open(t, "miss")
	mustMiss(t, s, "never/put")
	mustPut(t, s, "present", []byte{1})
	mustMiss(t, s, "present/child")
	mustMiss(t, s, "presen")
}

func overwriteDelete(t *testing.T, b Backend) {
	s := b.Open(t, "ow")
	mustPut(t, s, "k", []byte("first value, longer"))
	mustPut(t, s, "k", []byte("second"))
	mustGet(t, s, "k", []byte("second"))
	if err := s.Delete(ctx(t), "k"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	mustMiss(t, s, "k")
	if err := s.Delete(ctx(t), "k"); err != nil {
		t.Fatalf("delete of an absent key: %v", err)
	}
	mustPut(t, s, "k", []byte("again"))
	mustGet(t, s, "k", []byte("again"))
}

// shared: two stores of one job are two hosts publishing and reading each other's entries.
func shared(t *testing.T, b Backend) {
	a, c := b.Open(t, "sh"), b.Open(t, "sh")
	mustPut(t, a, "qp/a/1", []byte("from a"))
	mustPut(t, c, "qp/c/1", []byte("from c"))
	mustGet(t, c, "qp/a/1", []byte("from a"))
	mustGet(t, a, "qp/c/1", []byte("from c"))
	if err := c.Delete(ctx(t), "qp/a/1"); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, a, "qp/a/1")
}

// cancelled: a dead context is "could not answer", never "missing", and never a value.
func cancelled(t *testing.T, b Backend) {
	s := b.Open(t, "cx")
	mustPut(t, s, "k", []byte{7})
	c, cancel := context.WithCancel(context.Background())
	cancel()
	for _, k := range []string{"k", "absent"} {
		v, err := s.Get(c, k)
		if !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) || v != nil {
			t.Fatalf("get %q with a cancelled context = %x, %v; want ErrUnavailable", k, v, err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("get %q with a cancelled context: %v does not wrap context.Canceled", k, err)
		}
	}
	if err := s.Put(c, "k2", []byte{1}); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("put with a cancelled context: %v", err)
	}
	mustMiss(t, s, "k2")
}

// concurrent: several writers and readers on several stores; every reader sees, for each
// key, either nothing yet or one complete value some writer wrote (never a torn one).
func concurrent(t *testing.T, b Backend, seed uint64) {
	const writers, keys, rounds = 4, 8, 40
	stores := make([]kv.Store, writers)
	for i := range stores {
		stores[i] = b.Open(t, "cc")
	}
	value := func(w, k, round int) []byte {
		// A length and content that identify the writer and round, so a torn value shows.
		v := bytes.Repeat([]byte{byte(w), byte(k), byte(round)}, 100+w*37+round)
		return v
	}
	valid := func(k int, v []byte) bool {
		if len(v) == 0 || len(v)%3 != 0 {
			return false
		}
		w, kk, round := int(v[0]), int(v[1]), int(v[2])
		return kk == k && w < writers && round < rounds && bytes.Equal(v, value(w, k, round))
	}
	var wg sync.WaitGroup
	errc := make(chan error, 2*writers)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for round := 0; round < rounds; round++ {
				k := r.IntN(keys)
				if err := stores[w].Put(context.Background(), fmt.Sprintf("key/%d", k), value(w, k, round)); err != nil {
					errc <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(100+w)))
			for i := 0; i < rounds; i++ {
				k := r.IntN(keys)
				v, err := stores[(w+1)%writers].Get(context.Background(), fmt.Sprintf("key/%d", k))
				if errors.Is(err, kv.ErrNotFound) {
					continue
				}
				if err != nil {
					errc <- fmt.Errorf("reader %d: %w", w, err)
					return
				}
				if !valid(k, v) {
					errc <- fmt.Errorf("reader %d: key/%d holds a value no writer wrote (%d bytes)", w, k, len(v))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("seed %d: %v", seed, err)
	}
}

// isolation: two jobs use the same keys without seeing each other's entries.
func isolation(t *testing.T, b Backend) {
	a, c := b.Open(t, "jobA"), b.Open(t, "jobB")
	mustPut(t, a, "qp/x/1", []byte("A"))
	mustMiss(t, c, "qp/x/1")
	mustPut(t, c, "qp/x/1", []byte("B"))
	mustGet(t, a, "qp/x/1", []byte("A"))
	mustGet(t, c, "qp/x/1", []byte("B"))
	if err := c.Delete(ctx(t), "qp/x/1"); err != nil {
		t.Fatal(err)
	}
	mustGet(t, a, "qp/x/1", []byte("A"))
	// A job whose name is a prefix of another's must not see it either.
	p := b.Open(t, "job")
	mustMiss(t, p, "A/qp/x/1")
	mustMiss(t, p, "qp/x/1")
}

// failClosed: once the backend cannot answer, a key that exists and a key that does not both
// give ErrUnavailable — the failover layer must not mistake an unreachable store for "not
// published yet" — and writes fail.
func failClosed(t *testing.T, b Backend) {
	s := b.Open(t, "fc")
	mustPut(t, s, "present", []byte{1, 2, 3})
	mustGet(t, s, "present", []byte{1, 2, 3})
	b.Break(t)
	for _, k := range []string{"present", "absent"} {
		start := time.Now()
		v, err := s.Get(ctx(t), k)
		if !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) || v != nil {
			t.Fatalf("get %q from a broken store = %x, %v; want ErrUnavailable", k, v, err)
		}
		t.Logf("get %q from a broken store after %v: %v", k, time.Since(start).Round(time.Microsecond), err)
	}
	if err := s.Put(ctx(t), "new", []byte{1}); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("put to a broken store: %v", err)
	}
	if l, ok := s.(kv.Lister); ok {
		ents, err := l.List(ctx(t), "")
		if !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) || ents != nil {
			t.Fatalf("list of a broken store = %v, %v; want ErrUnavailable", ents, err)
		}
	}
}

// list: a Lister returns exactly the entries under the prefix, sorted, with their values,
// relative to its job; another job's keys (one whose name extends this one's included) and
// deleted keys are not listed.
func list(t *testing.T, b Backend) {
	s := b.Open(t, "lj")
	l, ok := s.(kv.Lister)
	if !ok {
		t.Skipf("%T is not a kv.Lister", s)
	}
	other := b.Open(t, "lj2")
	want := []kv.Entry{
		{Key: "list/mr/ab/1", Value: []byte{1}},
		{Key: "list/mr/ab/10/b1", Value: []byte{}},
		{Key: "list/mr/ab/2", Value: bytes.Repeat([]byte{0, 0xff}, 100)},
	}
	for _, e := range want {
		mustPut(t, s, e.Key, e.Value)
	}
	mustPut(t, s, "list/mr/ac/1", []byte{9})
	mustPut(t, s, "list/mr/ab/gone", []byte{9})
	if err := s.Delete(ctx(t), "list/mr/ab/gone"); err != nil {
		t.Fatal(err)
	}
	if b.Namespaced {
		mustPut(t, other, "list/mr/ab/3", []byte{7})
	}
	got, err := l.List(ctx(t), "list/mr/ab/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("list: %d entries %v, want %v", len(got), got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("list entry %d = %q %x, want %q %x", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
	if got, err := l.List(ctx(t), "list/none/"); err != nil || len(got) != 0 {
		t.Fatalf("list of an empty prefix: %v %v", got, err)
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := l.List(c, "list/"); !errors.Is(err, kv.ErrUnavailable) || got != nil {
		t.Fatalf("list with a cancelled context: %v %v, want ErrUnavailable", got, err)
	}
}
