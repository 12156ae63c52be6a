// Command shiftctl operates SHIFT on a host:
//
//	shiftctl status [-json] [-sysfs ROOT] [-w D [-n N]]  devices, ports, GIDs, netdevs, SHIFT processes
//	shiftctl metrics -listen ADDR [-sysfs ROOT]      the same as Prometheus metrics on http://ADDR/metrics
//	shiftctl inject -pid PID [-qpn QPN|all] [-n N]   arm failure injection in a process
//	shiftctl switch -pid PID -qpn QPN -to backup|default   move a process's QP between NICs
//	shiftctl kv get|put|list|purge -kv URL -job JOB [KEY [VALUE]]
//	shiftctl emu up|env|down -root DIR [NAME=IP ...]  emulated devices for unmodified programs
//	shiftctl demo [flags]                            the failover demo on emulated hosts
//
// and perf, a perftest-like latency and bandwidth tool over the Go provider:
//
//	shiftctl perf [-d dev] [-x gid] [-s size] [-n iters] [-q qps] [-t depth] [-I inline]
//	              [-test write|send|read] [-lat] [-p port] [server-host]
//	shiftctl perf -emulated [...]    # both sides in-process over two emulated hosts
//
// Without a server-host argument shiftctl perf waits as the server on TCP port -p; with one
// it connects to it as the client. Connection parameters travel over that TCP connection,
// as perftest exchanges them.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "perf":
		if err := perfMain(args[1:], stdout); err != nil {
			fmt.Fprintf(stderr, "shiftctl perf: %v\n", err)
			return 1
		}
		return 0
	case "demo":
		return demoMain(args[1:], stdout, stderr)
	case "status":
		return report(stderr, "status", statusMain(args[1:], stdout))
	case "metrics":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return report(stderr, "metrics", metricsMain(ctx, args[1:], stdout))
	case "inject":
		return report(stderr, "inject", injectMain(args[1:], stdout))
	case "switch":
		return report(stderr, "switch", switchMain(args[1:], stdout))
	case "kv":
		return report(stderr, "kv", kvMain(args[1:], stdout, os.Getenv))
	case "emu":
		return report(stderr, "emu", emuMain(args[1:], stdout))
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "shiftctl: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// report prints a command's error and turns it into the exit status: 1 for a failure, 2 for
// a command line that does not parse (flag errors and EINVAL from argument checks).
func report(stderr io.Writer, cmd string, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "shiftctl %s: %v\n", cmd, err)
	if isUsageError(err) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: shiftctl <command> [flags]")
	fmt.Fprintln(w, "commands:")
	fmt.Fprintln(w, statusUsage)
	fmt.Fprintln(w, metricsUsage)
	fmt.Fprintln(w, injectUsage)
	fmt.Fprintln(w, switchUsage)
	fmt.Fprintln(w, kvUsage)
	fmt.Fprintln(w, emuUsage)
	fmt.Fprintln(w, "  perf   RDMA latency/bandwidth test (write, send, read) over the Go mlx5 provider")
	fmt.Fprintln(w, demoUsage)
	fmt.Fprintln(w, "run 'shiftctl <command> -h' for a command's flags (perf, demo)")
}
