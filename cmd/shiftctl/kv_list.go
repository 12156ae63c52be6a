package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/shift-rdma/shift/failover/kv"
	"golang.org/x/sys/unix"
)

// listerFor returns the key enumeration of the backend behind st, which kv.OpenURL opened
// from a.url for job a.job. Keys come back relative to the job namespace "shift/<job>/",
// sorted.
func listerFor(st kv.Store, a kvArgs) (keyLister, error) {
	prefix := "shift/" + a.job + "/"
	switch st.(type) {
	case *kv.Dir:
		return func(ctx context.Context) ([]string, error) { return listDir(strings.TrimPrefix(a.url, "dir:"), prefix) }, nil
	case *kv.Redis:
		return func(ctx context.Context) ([]string, error) { return listRedis(ctx, a.url, prefix) }, nil
	}
	return nil, fmt.Errorf("%T cannot list its keys: %w", st, unix.EOPNOTSUPP)
}

// listDir lists the key files of a kv.Dir store. kv.Dir names each file after its
// namespaced key with every byte other than [A-Za-z0-9_-] written as %XX; Put's temporary
// files start with '.'.
func listDir(root, prefix string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("dir %s: read directory: %w: %w", root, kv.ErrUnavailable, err)
	}
	var keys []string
	for _, e := range ents {
		k, ok := unescapeDirKey(e.Name())
		if !ok || !strings.HasPrefix(k, prefix) {
			continue
		}
		keys = append(keys, strings.TrimPrefix(k, prefix))
	}
	slices.Sort(keys)
	return keys, nil
}

// unescapeDirKey inverts kv.Dir's file naming; names that it cannot have produced are not
// keys.
func unescapeDirKey(name string) (string, bool) {
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
	return b.String(), true
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

// listRedis scans the keys under prefix with a client of its own (kv.Redis does not expose
// its connection).
func listRedis(ctx context.Context, url, prefix string) ([]string, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: parse URL: %w: %w", kv.ErrUnavailable, err)
	}
	o.MaxRetries = 1
	c := redis.NewClient(o)
	var keys []string
	it := c.Scan(ctx, 0, redisGlobEscape(prefix)+"*", 256).Iterator()
	for it.Next(ctx) {
		keys = append(keys, strings.TrimPrefix(it.Val(), prefix))
	}
	err = it.Err()
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("redis scan %q: %w: %w", prefix, kv.ErrUnavailable, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// redisGlobEscape quotes the characters SCAN MATCH interprets.
func redisGlobEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
