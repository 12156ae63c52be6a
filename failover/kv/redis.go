package kv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ErrAuth: the store refused the credentials (wrong password, unknown or disabled ACL user,
// or a password required and none given). Errors carrying it also wrap ErrUnavailable, so
// the failover layer fails closed on them like on any other refusal.
var ErrAuth = errors.New("kv: authentication refused")

// DefaultTimeout bounds every operation of a store whose options leave the timeout at zero.
const DefaultTimeout = 2 * time.Second

// RedisOptions tune a Redis store.
type RedisOptions struct {
	// Job namespaces the keys: with Job "j", key k is stored as "shift/j/k". An empty Job
	// stores keys as given, for a caller that already namespaces them (the failover layer
	// builds "shift/<job>/..." keys itself).
	Job string
	// Timeout bounds each operation (connection included) in addition to the caller's
	// context; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Redis is a Store on a Redis server, shared by every host of a job (paper §4.1). It is
// safe for concurrent use; connections are pooled by go-redis.
type Redis struct {
	c       *redis.Client
	prefix  string
	timeout time.Duration
	addr    string // redacted URL, for error messages
}

// quietOnce silences go-redis's process-wide logger: its pool prints dial failures to
// stderr, and library code must return errors, not log them (the same failures reach the
// caller as errors).
var quietOnce sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// NewRedis connects to the server named by rawURL and checks the credentials with a PING, so
// that a wrong password fails here rather than at fallback time. The URL form is the one
// SHIFT_KV takes:
//
//	redis://[[user]:password@]host[:port][/db]
//
// "rediss://" uses TLS. A password alone ("redis://:secret@host:6379/0") authenticates as
// the default user (requirepass); "user:password" authenticates as an ACL user. The port
// defaults to 6379 and the database to 0. The password never appears in returned errors.
//
// The first call replaces go-redis's process-wide logger with one that discards, so that
// the client's internal retries print nothing; their failures are returned as errors.
func NewRedis(ctx context.Context, rawURL string, opts RedisOptions) (*Redis, error) {
	quietOnce.Do(func() { redis.SetLogger(discardLogger{}) })
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the input, which may hold a password: keep only the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("kv: redis: parse URL: %w", err)
	}
	shown := u.Redacted()
	prefix, err := jobPrefix(opts.Job)
	if err != nil {
		return nil, fmt.Errorf("kv: redis %s: %w", shown, err)
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("kv: redis %s: %w", shown, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	o.DialTimeout = opts.Timeout
	o.ReadTimeout = opts.Timeout
	o.WriteTimeout = opts.Timeout
	o.PoolTimeout = opts.Timeout
	o.ContextTimeoutEnabled = true
	// One retry covers a pooled connection the server closed; more would stretch the time
	// before the failover layer learns that the store is gone.
	o.MaxRetries = 1
	o.DialerRetries = 1
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	r := &Redis{c: redis.NewClient(o), prefix: prefix, timeout: opts.Timeout, addr: shown}
	if err := r.Ping(ctx); err != nil {
		r.c.Close()
		return nil, err
	}
	return r, nil
}

// Ping checks that the server answers and accepts the credentials.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if err := r.c.Ping(ctx).Err(); err != nil {
		return r.wrap(ctx, "ping", "", err)
	}
	return nil
}

// Put stores value under key, overwriting.
func (r *Redis) Put(ctx context.Context, key string, value []byte) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if value == nil {
		value = []byte{}
	}
	if err := r.c.Set(ctx, r.prefix+key, value, 0).Err(); err != nil {
		return r.wrap(ctx, "put", key, err)
	}
	return nil
}

// Get returns the value under key: an error wrapping ErrNotFound when the server answered
// that the key does not exist, and one wrapping ErrUnavailable when it could not answer
// (unreachable, timed out, refused the credentials or the key by ACL).
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	v, err := r.c.Get(ctx, r.prefix+key).Bytes()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("kv: redis %s: get %q: %w", r.addr, key, ErrNotFound)
		}
		return nil, r.wrap(ctx, "get", key, err)
	}
	return v, nil
}

// Delete removes key; an absent key is not an error.
func (r *Redis) Delete(ctx context.Context, key string) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if err := r.c.Del(ctx, r.prefix+key).Err(); err != nil {
		return r.wrap(ctx, "delete", key, err)
	}
	return nil
}

// Purge deletes every key of the store's job (the end of a job, or a test's cleanup). It
// refuses to run on a store without a Job, which would delete the whole database's
// "shift/" keys of every job.
func (r *Redis) Purge(ctx context.Context) error {
	if r.prefix == "" {
		return fmt.Errorf("kv: redis %s: purge: store has no job namespace", r.addr)
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	pattern := globEscape(r.prefix) + "*"
	it := r.c.Scan(ctx, 0, pattern, 256).Iterator()
	var batch []string
	for it.Next(ctx) {
		batch = append(batch, it.Val())
		if len(batch) == 256 {
			if err := r.c.Del(ctx, batch...).Err(); err != nil {
				return r.wrap(ctx, "purge", r.prefix, err)
			}
			batch = batch[:0]
		}
	}
	if err := it.Err(); err != nil {
		return r.wrap(ctx, "purge", r.prefix, err)
	}
	if len(batch) > 0 {
		if err := r.c.Del(ctx, batch...).Err(); err != nil {
			return r.wrap(ctx, "purge", r.prefix, err)
		}
	}
	return nil
}

// listBatch is how many keys one SCAN step asks for and one MGET reads.
const listBatch = 256

// List returns the entries whose key starts with prefix, sorted (Lister): SCAN MATCH over
// the job's keys, then MGET by batches. A key deleted between the two (a nil in the MGET
// reply) is left out; any error fails the listing with ErrUnavailable. The whole listing is
// bounded by the store's timeout.
func (r *Redis) List(ctx context.Context, prefix string) ([]Entry, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	full := r.prefix + prefix
	var keys []string
	it := r.c.Scan(ctx, 0, globEscape(full)+"*", listBatch).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return nil, r.wrap(ctx, "list", prefix, err)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // SCAN may return a key twice
	out := make([]Entry, 0, len(keys))
	for len(keys) > 0 {
		batch := keys[:min(len(keys), listBatch)]
		keys = keys[len(batch):]
		vals, err := r.c.MGet(ctx, batch...).Result()
		if err != nil {
			return nil, r.wrap(ctx, "list", prefix, err)
		}
		for i, v := range vals {
			var b []byte
			switch v := v.(type) {
			case nil:
				continue // deleted since the SCAN
			case string:
				b = []byte(v)
			case []byte:
				b = v
			default:
				return nil, r.wrap(ctx, "list", prefix, fmt.Errorf("MGET %q: reply of type %T", batch[i], v))
			}
			out = append(out, Entry{Key: strings.TrimPrefix(batch[i], r.prefix), Value: b})
		}
	}
	return out, nil
}

// Close closes the connection pool.
func (r *Redis) Close() error {
	if err := r.c.Close(); err != nil {
		return fmt.Errorf("kv: redis %s: close: %w", r.addr, err)
	}
	return nil
}

// bound applies the store's per-operation timeout to ctx.
func (r *Redis) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

// wrap turns a go-redis error into one wrapping ErrUnavailable (and ErrAuth for refused
// credentials), naming the operation and the key, and keeping the cause (a syscall errno, a
// context error) reachable by errors.Is.
func (r *Redis) wrap(ctx context.Context, op, key string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	}
	what := op
	if key != "" {
		what = fmt.Sprintf("%s %q", op, key)
	}
	if isAuthError(err) {
		return fmt.Errorf("kv: redis %s: %s: %w: %w: %w", r.addr, what, ErrUnavailable, ErrAuth, err)
	}
	return fmt.Errorf("kv: redis %s: %s: %w: %w", r.addr, what, ErrUnavailable, err)
}

// isAuthError recognises the server's replies to missing or wrong credentials.
func isAuthError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password")
}

// globEscape quotes the characters that SCAN MATCH patterns interpret.
func globEscape(s string) string {
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
