package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/shift-rdma/shift/failover"
	"golang.org/x/sys/unix"
)

const injectUsage = `  inject -pid PID [-qpn QPN|all] [-n N] [-file PATH] [-timeout 5s]
         arm SHIFT's failure injection in a running process: the N-th WR posted on QP QPN
         after the command returns gets an invalid lkey, so it and its QP fail with a local
         protection error and SHIFT resubmits it on the backup; waits for the process to
         acknowledge the arm (it must run with SHIFT_INJECT_SHM=1)
    -pid PID     the process whose control file to write (required; the caller's own
                 processes only, unless root)
    -qpn QPN     the default QP's number, decimal or 0x hex, or "all" for any QP (default all)
    -n N         the countdown: 1 is the next WR with a local key (default 1); 0 disarms
    -file PATH   write this injection file instead of the process's control file in its
                 user's runtime directory ($XDG_RUNTIME_DIR/shift or /dev/shm/shift-<uid>)
    -timeout D   how long to wait for the acknowledgement (default 5s); without one the
                 words stay written and apply when the process reads them`

// injectArgs is a parsed shiftctl inject command line.
type injectArgs struct {
	pid     int
	qpn     uint32 // 0: any QP
	n       int64
	file    string
	timeout time.Duration
}

func parseInjectArgs(args []string) (injectArgs, error) {
	fs := flag.NewFlagSet("inject", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pid := fs.Int("pid", 0, "")
	qpn := fs.String("qpn", "all", "")
	n := fs.Int64("n", 1, "")
	file := fs.String("file", "", "")
	timeout := fs.Duration("timeout", 5*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return injectArgs{}, fmt.Errorf("%w\n%s", err, injectUsage)
	}
	if fs.NArg() != 0 {
		return injectArgs{}, fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), injectUsage)
	}
	a := injectArgs{pid: *pid, n: *n, timeout: *timeout}
	var err error
	if a.file, err = shmFile(a.pid, *file); err != nil {
		return a, err
	}
	if a.n < 0 {
		return a, fmt.Errorf("-n %d: want ≥ 0: %w", a.n, unix.EINVAL)
	}
	if a.timeout <= 0 {
		return a, fmt.Errorf("-timeout %v: want > 0: %w", a.timeout, unix.EINVAL)
	}
	if *qpn != "all" {
		v, err := strconv.ParseUint(*qpn, 0, 24)
		if err != nil || v == 0 {
			return a, fmt.Errorf("-qpn %q: want a QPN in [1, 0xffffff] or all: %w", *qpn, unix.EINVAL)
		}
		a.qpn = uint32(v)
	}
	return a, nil
}

// shmFile checks -pid and returns -file ("" for the process's own control file, which
// openControl finds when the command runs).
func shmFile(pid int, file string) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("-pid: a process id > 0 is required: %w", unix.EINVAL)
	}
	return file, nil
}

func injectMain(args []string, stdout io.Writer) error {
	a, err := parseInjectArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		_, err = fmt.Fprintln(stdout, injectUsage)
		return err
	}
	if err != nil {
		return usageError{err}
	}
	if err := injectInto(&a); err != nil {
		return err
	}
	target := "any QP"
	if a.qpn != 0 {
		target = fmt.Sprintf("QP %#x", a.qpn)
	}
	if a.n == 0 {
		fmt.Fprintf(stdout, "disarmed injection of pid %d (%s)\n", a.pid, a.file)
	} else {
		fmt.Fprintf(stdout, "armed pid %d: WR %d from now on %s gets an invalid lkey (%s)\n", a.pid, a.n, target, a.file)
	}
	return nil
}

// injectInto checks the process and its file, then lets package failover run the exchange
// (the protocol lives next to the watcher that answers it). a.file becomes the file written.
func injectInto(a *injectArgs) error {
	f, err := openControl(a.pid, a.file)
	if err != nil {
		return err
	}
	defer f.Close()
	a.file = f.Name()
	err = failover.RequestInjectFile(f, a.qpn, a.n, a.timeout)
	if errors.Is(err, failover.ErrNoAnswer) {
		return fmt.Errorf("process %d did not acknowledge within %v (is it running with SHIFT_INJECT_SHM=1, with a SHIFT context open?): %w",
			a.pid, a.timeout, err)
	}
	return err
}
