package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"golang.org/x/sys/unix"
)

const kvUsage = `  kv get|put|list|purge -kv URL -job JOB [-hex] [-timeout D] [KEY [VALUE]]
         read and write SHIFT's attribute store (the SHIFT_KV service) in job JOB's
         namespace: KEY is relative to shift/JOB/ (e.g. qp/<gid hex>/<qpn>)
           get KEY          print the value (raw bytes, or hex with -hex)
           put KEY VALUE    store VALUE (taken as hex with -hex)
           list             print every key of the job with its value's length (and hex
                            value with -hex)
           purge            delete every key of the job
    -kv URL      the store, as SHIFT_KV: redis://[[user]:password@]host[:port][/db],
                 rediss://..., or dir:PATH (default $SHIFT_KV)
    -job JOB     the job namespace, without '/' (default $SHIFT_JOB)
    -hex         values in hex on output and input
    -timeout D   bound on each store operation (default 2s)`

// purger is what the Dir and Redis backends offer beyond kv.Store.
type purger interface {
	Purge(ctx context.Context) error
}

type kvArgs struct {
	op, url, job string
	hex          bool
	timeout      time.Duration
	rest         []string
}

func parseKVArgs(args []string, getenv func(string) string) (kvArgs, error) {
	var a kvArgs
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return a, fmt.Errorf("kv: want an operation (get, put, list, purge) first: %w\n%s", unix.EINVAL, kvUsage)
	}
	a.op = args[0]
	fs := flag.NewFlagSet("kv", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.url, "kv", getenv("SHIFT_KV"), "")
	fs.StringVar(&a.job, "job", getenv("SHIFT_JOB"), "")
	fs.BoolVar(&a.hex, "hex", false, "")
	fs.DurationVar(&a.timeout, "timeout", kv.DefaultTimeout, "")
	// Flags may come before or after the positional arguments.
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return a, fmt.Errorf("kv %s: %w\n%s", a.op, err, kvUsage)
		}
		if fs.NArg() == 0 {
			break
		}
		a.rest = append(a.rest, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	want := map[string]int{"get": 1, "put": 2, "list": 0, "purge": 0}
	n, ok := want[a.op]
	if !ok {
		return a, fmt.Errorf("kv: unknown operation %q (want get, put, list or purge): %w", a.op, unix.EINVAL)
	}
	if len(a.rest) != n {
		return a, fmt.Errorf("kv %s: %d arguments, want %d: %w\n%s", a.op, len(a.rest), n, unix.EINVAL, kvUsage)
	}
	if a.url == "" {
		return a, fmt.Errorf("kv %s: no store: give -kv URL or set SHIFT_KV: %w", a.op, unix.EINVAL)
	}
	if a.job == "" {
		// Without a job the keys would be the raw keys of every job: purge would refuse and
		// list would show other jobs' entries as this one's.
		return a, fmt.Errorf("kv %s: no job: give -job JOB or set SHIFT_JOB: %w", a.op, unix.EINVAL)
	}
	if a.timeout <= 0 {
		return a, fmt.Errorf("kv %s: -timeout %v: want > 0: %w", a.op, a.timeout, unix.EINVAL)
	}
	return a, nil
}

func kvMain(args []string, stdout io.Writer, getenv func(string) string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		_, err := fmt.Fprintln(stdout, kvUsage)
		return err
	}
	a, err := parseKVArgs(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		_, err = fmt.Fprintln(stdout, kvUsage)
		return err
	}
	if err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*a.timeout+time.Second)
	defer cancel()
	st, err := kv.OpenURL(ctx, a.url, a.job, a.timeout)
	if err != nil {
		return err
	}
	err = kvRun(ctx, a, st, stdout)
	return errors.Join(err, st.Close())
}

func kvRun(ctx context.Context, a kvArgs, st kv.Store, out io.Writer) error {
	switch a.op {
	case "get":
		v, err := st.Get(ctx, a.rest[0])
		if err != nil {
			return err
		}
		if a.hex {
			_, err = fmt.Fprintln(out, hex.EncodeToString(v))
		} else {
			_, err = out.Write(v)
		}
		return err
	case "put":
		v := []byte(a.rest[1])
		if a.hex {
			var err error
			if v, err = hex.DecodeString(a.rest[1]); err != nil {
				return fmt.Errorf("kv put %q: value is not hex (%v): %w", a.rest[0], err, unix.EINVAL)
			}
		}
		if err := st.Put(ctx, a.rest[0], v); err != nil {
			return err
		}
		return nil
	case "purge":
		p, ok := st.(purger)
		if !ok {
			return fmt.Errorf("kv purge: %T cannot purge: %w", st, unix.EOPNOTSUPP)
		}
		if err := p.Purge(ctx); err != nil {
			return err
		}
		return nil
	case "list":
		l, ok := st.(kv.Lister)
		if !ok {
			return fmt.Errorf("kv list: %T cannot list its keys: %w", st, unix.EOPNOTSUPP)
		}
		ents, err := l.List(ctx, "")
		if err != nil {
			return fmt.Errorf("kv list: %w", err)
		}
		for _, e := range ents {
			if a.hex {
				fmt.Fprintf(out, "%s\t%d\t%s\n", e.Key, len(e.Value), hex.EncodeToString(e.Value))
			} else {
				fmt.Fprintf(out, "%s\t%d\n", e.Key, len(e.Value))
			}
		}
		return nil
	}
	return fmt.Errorf("kv: unknown operation %q: %w", a.op, unix.EINVAL)
}
