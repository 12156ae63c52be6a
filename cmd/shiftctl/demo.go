package main

import (
	"io"

	"github.com/shift-rdma/shift/internal/demo"
)

// demoMain is `shiftctl demo [flags]`: the demo of package internal/demo (two emulated hosts
// with two NICs each, a verified WRITE/WRITE_IMM and SEND workload, the default NIC failing
// and coming back, without and with SHIFT; a throughput table, timeline.csv/svg/png and a
// verdict). It returns the exit status: 0 when every requested mode ran, 1 when one could
// not, 2 for bad flags.
func demoMain(args []string, stdout, stderr io.Writer) int {
	return demo.Main(args, stdout, stderr)
}

// demoUsage is the demo's line in shiftctl's command list.
const demoUsage = "  demo   the SHIFT demo on emulated hosts: traffic through a NIC failure, without failover, with it, and with it reading link events"
