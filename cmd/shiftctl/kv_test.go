package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/failover/kv/kvtest"
	"golang.org/x/sys/unix"
)

// kvCmd runs shiftctl kv with the given arguments and no environment.
func kvCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errw strings.Builder
	code := run(append([]string{"kv"}, args...), &out, &errw)
	return out.String(), errw.String(), code
}

// checkKV runs every operation against the store at url: put (text and hex, keys with
// characters that need escaping), get, list (only this job's keys, sorted, lengths and hex
// values), purge (this job's keys only), and a missing key. other is a second job on the
// same store, whose keys must survive.
func checkKV(t *testing.T, url string) {
	job, other := fmt.Sprintf("ctl%d", os.Getpid()), fmt.Sprintf("ctlother%d", os.Getpid())
	must := func(args ...string) string {
		t.Helper()
		out, errw, code := kvCmd(t, args...)
		if code != 0 {
			t.Fatalf("kv %v: exit %d: %s", args, code, errw)
		}
		return out
	}
	must("put", "-kv", url, "-job", job, "qp/fe80::1/17", "hello")
	must("put", "-kv", url, "-job", job, "-hex", "mr/0a000001/4096", "00ff10")
	must("put", "-kv", url, "-job", other, "qp/x/1", "theirs")
	if got := must("get", "-kv", url, "-job", job, "qp/fe80::1/17"); got != "hello" {
		t.Errorf("get: %q", got)
	}
	// Flags after the key work too.
	if got := must("get", "mr/0a000001/4096", "-kv", url, "-job", job, "-hex"); got != "00ff10\n" {
		t.Errorf("get -hex: %q", got)
	}
	if got := must("list", "-kv", url, "-job", job); got != "mr/0a000001/4096\t3\nqp/fe80::1/17\t5\n" {
		t.Errorf("list: %q", got)
	}
	if got := must("list", "-kv", url, "-job", job, "-hex"); got != "mr/0a000001/4096\t3\t00ff10\nqp/fe80::1/17\t5\t68656c6c6f\n" {
		t.Errorf("list -hex: %q", got)
	}
	_, errw, code := kvCmd(t, "get", "-kv", url, "-job", job, "qp/none/1")
	if code != 1 || !strings.Contains(errw, "key not found") || !strings.Contains(errw, `get "qp/none/1"`) {
		t.Errorf("missing key: exit %d: %s", code, errw)
	}
	must("purge", "-kv", url, "-job", job)
	if got := must("list", "-kv", url, "-job", job); got != "" {
		t.Errorf("list after purge: %q", got)
	}
	if got := must("get", "-kv", url, "-job", other, "qp/x/1"); got != "theirs" {
		t.Errorf("the other job's key after purge: %q", got)
	}
	must("purge", "-kv", url, "-job", other)
}

func TestKVDir(t *testing.T) {
	dir := t.TempDir()
	checkKV(t, "dir:"+dir)
	// A Put's temporary file is not a key.
	if err := os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := kv.NewDir(dir, kv.DirOptions{Job: "j"})
	if err != nil {
		t.Fatal(err)
	}
	if ents, err := st.List(context.Background(), ""); err != nil || len(ents) != 0 {
		t.Errorf("%v %v", ents, err)
	}
}

// What the failover layer writes (through a Dir opened without a job, keys built as
// shift/<job>/...) is what shiftctl lists and reads for that job.
func TestKVSeesFailoverKeys(t *testing.T) {
	dir := t.TempDir()
	st, err := kv.NewDir(dir, kv.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), "shift/jobA/qp/fe800000000000000000000000000001/291", []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	out, errw, code := kvCmd(t, "list", "-kv", "dir:"+dir, "-job", "jobA", "-hex")
	if code != 0 || out != "qp/fe800000000000000000000000000001/291\t3\t010203\n" {
		t.Errorf("exit %d %q %s", code, out, errw)
	}
}

func TestKVRedis(t *testing.T) {
	s := kvtest.StartRedis(t, kvtest.RedisConfig{Password: "pw-ctl"})
	checkKV(t, s.URLWith("", "pw-ctl"))
	// A wrong password is refused at open; the error does not show it.
	_, errw, code := kvCmd(t, "list", "-kv", s.URLWith("", "wrong-secret"), "-job", "j")
	if code != 1 || !strings.Contains(errw, "authentication refused") || strings.Contains(errw, "wrong-secret") {
		t.Errorf("wrong password: exit %d: %s", code, errw)
	}
	// A server that went away: unavailable, with the errno of the failed connect.
	url := s.URLWith("", "pw-ctl")
	s.Kill()
	var out strings.Builder
	err := kvMain([]string{"get", "-kv", url, "-job", "j", "-timeout", "500ms", "k"}, &out, func(string) string { return "" })
	if !errors.Is(err, kv.ErrUnavailable) || !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("dead server: %v", err)
	}
}

func TestKVArgs(t *testing.T) {
	env := map[string]string{"SHIFT_KV": "dir:/nonexistent", "SHIFT_JOB": "envjob"}
	a, err := parseKVArgs([]string{"get", "k"}, func(k string) string { return env[k] })
	if err != nil || a.url != "dir:/nonexistent" || a.job != "envjob" || a.timeout != kv.DefaultTimeout || a.rest[0] != "k" {
		t.Fatalf("%+v %v", a, err)
	}
	noenv := func(string) string { return "" }
	for _, args := range [][]string{
		{}, {"-kv", "dir:/x"}, {"fetch", "-kv", "dir:/x", "-job", "j"}, {"get", "-kv", "dir:/x", "-job", "j"},
		{"put", "-kv", "dir:/x", "-job", "j", "k"}, {"list", "-kv", "dir:/x", "-job", "j", "extra"},
		{"get", "-job", "j", "k"}, {"get", "-kv", "dir:/x", "k"}, {"get", "-kv", "dir:/x", "-job", "j", "-timeout", "0s", "k"},
	} {
		if _, err := parseKVArgs(args, noenv); !errors.Is(err, unix.EINVAL) && !strings.Contains(fmt.Sprint(err), "flag") {
			t.Errorf("%v: %v", args, err)
		} else if err == nil {
			t.Errorf("%v accepted", args)
		}
		if _, _, code := kvCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// Operation errors exit 1 and keep the errno: a store directory that is not there, an
	// unknown URL form, a job holding '/', a value that is not hex.
	missing := filepath.Join(t.TempDir(), "gone")
	if err := kvMain([]string{"list", "-kv", "dir:" + missing, "-job", "j"}, &strings.Builder{}, noenv); !errors.Is(err, unix.ENOENT) || !errors.Is(err, kv.ErrUnavailable) {
		t.Errorf("missing dir: %v", err)
	}
	if _, errw, code := kvCmd(t, "list", "-kv", "etcd://h", "-job", "j"); code != 1 || !strings.Contains(errw, "want redis://") || !strings.Contains(errw, "invalid argument") {
		t.Errorf("bad URL: %d %s", code, errw)
	}
	dir := t.TempDir()
	if err := kvMain([]string{"list", "-kv", "dir:" + dir, "-job", "a/b"}, &strings.Builder{}, noenv); !errors.Is(err, unix.EINVAL) {
		t.Errorf("job with '/': %v", err)
	}
	if err := kvMain([]string{"put", "-hex", "-kv", "dir:" + dir, "-job", "j", "k", "zz"}, &strings.Builder{}, noenv); !errors.Is(err, unix.EINVAL) {
		t.Errorf("bad hex: %v", err)
	}
}
