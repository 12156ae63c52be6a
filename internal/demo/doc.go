// Package demo is SHIFT-Go's main job (`make demo`): two emulated hosts with two emulated
// ConnectX NICs each on one in-process fabric, an NCCL-like workload with data verification,
// the default NIC's link failing and coming back on a schedule, a per-100 ms throughput
// timeline, a plot (SVG and PNG) with a CSV, and a one-line verdict.
//
// The workload has two streams from host 0 to host 1, each on its own RC QP pair:
//   - WRITE: NCCL's Simple protocol. Each message fills a slot of the sender's buffer with a
//     pattern derived from its sequence number, RDMA WRITEs it in chunks to the same slot at
//     the receiver, then posts a zero-length WRITE_WITH_IMM whose immediate is the sequence
//     number (the flag). The receiver checks the slot's bytes when the flag's completion
//     arrives.
//   - SEND: SEND/RECV messages carrying their sequence number; the receiver checks exactly
//     once, in order, and the bytes.
//
// Flow control (the receiver's "slot free" credits) goes through process memory, since both
// emulated hosts live in one process; NCCL returns those credits with an RDMA WRITE. Credits
// only pace the sender: every byte the verifier counts went over the emulated NICs.
//
// The demo runs the same workload over a Stack: provider (the plain provider, the baseline
// where the failure kills the traffic with RETRY_EXC_ERR, as a job without SHIFT dies) or
// shift (package failover with each host's NIC 1 as the backup of its NIC 0). The stack's
// constructor is the only thing a mode changes.
//
// Run does one run; Main is the command line (`go run ./internal/demo/cmd/demo`, flags
// -mode provider|shift|shift-watch|both|all, -duration, -fail-at, -recover-at, -fail-host, -interval,
// -timeout, -seed, -out, -quiet, -table, -tools, -plugin). For every run it prints a live
// progress line when stdout is a terminal, the table of Gbit/s per interval with -table (each
// stream's verified bytes, and the payload through host 0's NIC0 and NIC1 as the fabric counts
// it; timeline.csv always has it), and writes timeline.csv, timeline.svg and timeline.png
// (drawn with gonum/plot) with both runs on one time axis and one y range per quantity, the
// failure and the recovery marked, and on the SHIFT panel when the traffic reached the backup
// NIC and when it was back on the default one, as the SHIFT paper's Figure 7. It ends with
// notes (the longest pause of each stream, the gap between the link going down and traffic on
// the backup, where the traffic went after the link came back, the failover's counters) and,
// last, one verdict line per run: bytes verified, messages verified, errors seen by the
// application.
package demo
