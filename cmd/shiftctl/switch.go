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

const switchUsage = `  switch -pid PID -qpn QPN -to backup|default [-file PATH] [-timeout 5s]
         active switching in a running process: move the traffic of QP QPN (and of its peer)
         to the backup NIC, or back to the default NIC after such a switch; waits for the
         process's answer (it must run with SHIFT_INJECT_SHM=1)
    -pid PID       the process whose control file to write (required; the caller's own
                   processes only, unless root)
    -qpn QPN       the default QP's number, decimal or 0x hex (required)
    -to WHERE      backup or default (required)
    -file PATH     use this injection file instead of the process's control file
    -timeout D     how long to wait for the answer (default 5s)`

// switchArgs is a parsed shiftctl switch command line.
type switchArgs struct {
	pid      int
	qpn      uint32
	toBackup bool
	file     string
	timeout  time.Duration
}

func parseSwitchArgs(args []string) (switchArgs, error) {
	fs := flag.NewFlagSet("switch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pid := fs.Int("pid", 0, "")
	qpn := fs.String("qpn", "", "")
	to := fs.String("to", "", "")
	file := fs.String("file", "", "")
	timeout := fs.Duration("timeout", 5*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return switchArgs{}, fmt.Errorf("%w\n%s", err, switchUsage)
	}
	if fs.NArg() != 0 {
		return switchArgs{}, fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), switchUsage)
	}
	a := switchArgs{pid: *pid, timeout: *timeout}
	var err error
	if a.file, err = shmFile(a.pid, *file); err != nil {
		return a, err
	}
	v, err := strconv.ParseUint(*qpn, 0, 24)
	if err != nil || v == 0 {
		return a, fmt.Errorf("-qpn %q: want a QPN in [1, 0xffffff]: %w", *qpn, unix.EINVAL)
	}
	a.qpn = uint32(v)
	switch *to {
	case "backup":
		a.toBackup = true
	case "default":
	default:
		return a, fmt.Errorf("-to %q: want backup or default: %w", *to, unix.EINVAL)
	}
	if a.timeout <= 0 {
		return a, fmt.Errorf("-timeout %v: want > 0: %w", a.timeout, unix.EINVAL)
	}
	return a, nil
}

func switchMain(args []string, stdout io.Writer) error {
	a, err := parseSwitchArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		_, err = fmt.Fprintln(stdout, switchUsage)
		return err
	}
	if err != nil {
		return usageError{err}
	}
	if err := switchIn(a); err != nil {
		return err
	}
	where := "back to the default NIC"
	if a.toBackup {
		where = "to the backup"
	}
	_, err = fmt.Fprintf(stdout, "QP %#x of pid %d: moving %s\n", a.qpn, a.pid, where)
	return err
}

// switchIn checks the process and its file, then lets package failover run the exchange
// (the protocol lives next to the watcher that answers it).
func switchIn(a switchArgs) error {
	f, err := openControl(a.pid, a.file)
	if err != nil {
		return err
	}
	defer f.Close()
	err = failover.RequestSwitchFile(f, a.qpn, a.toBackup, a.timeout)
	if errors.Is(err, failover.ErrNoAnswer) {
		return fmt.Errorf("process %d did not answer within %v (is it running with SHIFT_INJECT_SHM=1, with a SHIFT context open?): %w",
			a.pid, a.timeout, err)
	}
	return err
}
