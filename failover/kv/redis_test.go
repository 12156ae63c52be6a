package kv_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/failover/kv/kvtest"
)

// redisBackend runs the stores of a test over one server; Break kills it.
func redisBackend(t *testing.T, s *kvtest.RedisServer) kvtest.Backend {
	return kvtest.Backend{
		Open: func(t testing.TB, job string) kv.Store {
			r, err := kv.NewRedis(context.Background(), s.URL(), kv.RedisOptions{Job: job, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatalf("%v\nserver log:\n%s", err, s.Log())
			}
			t.Cleanup(func() { r.Close() })
			return r
		},
		Namespaced: true,
		Break:      func(t testing.TB) { s.Kill() },
	}
}

func TestRedisConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  kvtest.RedisConfig
	}{
		{"NoAuth", kvtest.RedisConfig{}},
		{"RequirePass", kvtest.RedisConfig{Password: "s3cret:/@pw"}},
		{"ACLUser", kvtest.RedisConfig{User: "shift", UserPassword: "acl-pw"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			kvtest.Run(t, redisBackend(t, kvtest.StartRedis(t, c.cfg)))
		})
	}
}

// TestRedisAuth: wrong or missing credentials fail at NewRedis with ErrAuth (and
// ErrUnavailable), and the password does not appear in the error.
func TestRedisAuth(t *testing.T) {
	ctx := context.Background()
	pass := kvtest.StartRedis(t, kvtest.RedisConfig{Password: "right-pw"})
	acl := kvtest.StartRedis(t, kvtest.RedisConfig{User: "shift", UserPassword: "right-pw"})
	for _, c := range []struct{ name, url string }{
		{"WrongPassword", pass.URLWith("", "wrong-pw")},
		{"NoPassword", pass.URLWith("", "")},
		{"WrongACLPassword", acl.URLWith("shift", "wrong-pw")},
		{"UnknownACLUser", acl.URLWith("nobody", "right-pw")},
		{"DefaultUserDisabled", acl.URLWith("", "")},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := kv.NewRedis(ctx, c.url, kv.RedisOptions{Job: "j"})
			if err == nil {
				r.Close()
				t.Fatal("connected with bad credentials")
			}
			if !errors.Is(err, kv.ErrAuth) || !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) {
				t.Fatalf("error %v: want ErrAuth and ErrUnavailable", err)
			}
			if strings.Contains(err.Error(), "wrong-pw") || strings.Contains(err.Error(), "right-pw") {
				t.Fatalf("error shows the password: %v", err)
			}
			t.Log(err)
		})
	}
	for _, u := range []string{pass.URL(), acl.URL()} {
		r, err := kv.NewRedis(ctx, u, kv.RedisOptions{Job: "j"})
		if err != nil {
			t.Fatalf("right credentials: %v", err)
		}
		r.Close()
	}
}

// TestRedisACLKeyPattern: an ACL user restricted to one job's keys works in that job and is
// refused (ErrUnavailable, not ErrNotFound) in another.
func TestRedisACLKeyPattern(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartRedis(t, kvtest.RedisConfig{User: "jobA", UserPassword: "pw", KeyPattern: "shift/jobA/*"})
	a, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Job: "jobA"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Put(ctx, "qp/1", []byte{1}); err != nil {
		t.Fatal(err)
	}
	b, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Job: "jobB"})
	if err != nil {
		t.Fatal(err) // PING needs no key: the connection itself is allowed
	}
	defer b.Close()
	if err := b.Put(ctx, "qp/1", []byte{2}); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("put outside the user's keys: %v", err)
	}
	if _, err := b.Get(ctx, "qp/1"); !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get outside the user's keys: %v", err)
	} else {
		t.Log(err)
	}
}

// TestRedisUnreachable: a server that dies, or never existed, is ErrUnavailable carrying
// ECONNREFUSED; a hung server (SIGSTOP) is ErrUnavailable after the store's timeout, not
// a hang.
func TestRedisUnreachable(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartRedis(t, kvtest.RedisConfig{})
	r, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Job: "u", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Put(ctx, "k", []byte{1}); err != nil {
		t.Fatal(err)
	}

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = r.Get(ctx, "k")
	took := time.Since(start)
	if err2 := s.Resume(); err2 != nil {
		t.Fatal(err2)
	}
	if !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get from a hung server: %v", err)
	}
	if took > 20*time.Second { // failure guard only: the bound is the 300 ms timeout
		t.Fatalf("get from a hung server took %v", took)
	}
	t.Logf("hung server: %v after %v", err, took.Round(time.Millisecond))
	if _, err := r.Get(ctx, "k"); err != nil {
		t.Fatalf("get after the server resumed: %v", err)
	}

	s.Kill()
	_, err = r.Get(ctx, "k")
	if !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get from a killed server: %v", err)
	}
	// The pooled connection sees EOF or a reset; the retry dials and is refused.
	if !errors.Is(err, unix.ECONNREFUSED) {
		t.Logf("get from a killed server (no ECONNREFUSED in the chain): %v", err)
	}
	if _, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Timeout: 300 * time.Millisecond}); !errors.Is(err, kv.ErrUnavailable) || !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("connect to a dead server: %v", err)
	}
}

func TestRedisURLErrors(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"http://host:1", "redis://:pw@host:1/notanumber", "redis://u:p%zz@h"} {
		_, err := kv.NewRedis(ctx, u, kv.RedisOptions{})
		if err == nil {
			t.Fatalf("%s: accepted", u)
		}
		if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "p%zz") {
			t.Fatalf("%s: error shows the password: %v", u, err)
		}
	}
	if _, err := kv.NewRedis(ctx, "redis://127.0.0.1:1", kv.RedisOptions{Job: "a/b"}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("job with a slash: %v", err)
	}
}

// TestRedisPurge: Purge removes its job's keys, glob characters in the job name included,
// and no other job's.
func TestRedisPurge(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartRedis(t, kvtest.RedisConfig{})
	open := func(job string) *kv.Redis {
		r, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Job: job})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	glob, other := open("j*"), open("jx")
	for i := 0; i < 600; i++ {
		k := "k/" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "/" + time.Duration(i).String()
		if err := glob.Put(ctx, k, []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Put(ctx, "k", []byte{2}); err != nil {
		t.Fatal(err)
	}
	if err := glob.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := glob.Get(ctx, "k/a/0s"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("after purge: %v", err)
	}
	if v, err := other.Get(ctx, "k"); err != nil || len(v) != 1 || v[0] != 2 {
		t.Fatalf("other job after purge: %v %v", v, err)
	}
	if err := open("").Purge(ctx); err == nil {
		t.Fatal("purge without a job succeeded")
	}
}

// TestRedisCloseLeaksNothing: a store's goroutines and connections end with Close.
func TestRedisCloseLeaksNothing(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartRedis(t, kvtest.RedisConfig{Password: "pw"})
	before := runtime.NumGoroutine()
	fdsBefore := openFDs(t)
	for i := 0; i < 3; i++ {
		r, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Job: "leak"})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 20; j++ {
			if err := r.Put(ctx, "k", []byte{byte(j)}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Get(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before || openFDs(t) > fdsBefore {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines %d → %d, fds %d → %d after Close\n%s", before, runtime.NumGoroutine(),
				fdsBefore, openFDs(t), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("fd count needs /proc: %v", err)
	}
	return len(ents)
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := kv.OpenURL(ctx, "dir:"+root, "j", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.(*kv.Dir); !ok {
		t.Fatalf("dir: gave %T", d)
	}
	s := kvtest.StartRedis(t, kvtest.RedisConfig{Password: "pw"})
	r, err := kv.OpenURL(ctx, s.URL(), "j", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Put(ctx, "k", []byte{1}); err != nil {
		t.Fatal(err)
	}
	// The same entry through a store without a job, under its namespaced key.
	raw, err := kv.OpenURL(ctx, s.URL(), "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if v, err := raw.Get(ctx, "shift/j/k"); err != nil || len(v) != 1 {
		t.Fatalf("namespaced key: %v %v", v, err)
	}
	for _, bad := range []string{"", "mem", "http://u:secretpw@h"} {
		_, err := kv.OpenURL(ctx, bad, "j", 0)
		if !errors.Is(err, unix.EINVAL) || strings.Contains(fmt.Sprint(err), "secretpw") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

// BenchmarkRedisGet: one Get of a 4-byte entry (an rkey mapping) from a loopback
// redis-server, the cost of a cache miss at fallback time.
func BenchmarkRedisGet(b *testing.B) {
	ctx := context.Background()
	s := kvtest.StartRedis(b, kvtest.RedisConfig{})
	r, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Job: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := r.Put(ctx, "mr/fe80000000000000000000000000001/4660", []byte{0, 0, 0x12, 0x34}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Get(ctx, "mr/fe80000000000000000000000000001/4660"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRedisDocumentedACL: the per-job ACL user docs/SECURITY.md gives an operator (its keys
// and commands) is enough for the store: put, get, delete and the connection itself.
func TestRedisDocumentedACL(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartRedis(t, kvtest.RedisConfig{User: "jobJ", UserPassword: "pw", KeyPattern: "shift/J/*",
		Commands: []string{"-@all", "+get", "+set", "+del", "+ping", "+hello", "+select", "+scan"}})
	r, err := kv.NewRedis(ctx, s.URL(), kv.RedisOptions{Job: "J"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Put(ctx, "shift/J/qp/x/1", []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Get(ctx, "shift/J/qp/x/1"); err != nil || len(v) != 2 {
		t.Fatalf("get: %v %v", v, err)
	}
	if err := r.Delete(ctx, "shift/J/qp/x/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "shift/J/qp/x/1"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}
