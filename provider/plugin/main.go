// Command plugin is libmlx5-shift, the libibverbs provider plugin of SHIFT-Go, built with
// `go build -buildmode=c-shared` into libmlx5-shift-rdmav34.so (make plugin).
//
// Unmodified verbs programs (perftest, ibv_rc_pingpong, NCCL) load it through libibverbs and
// get the mlx5 provider of package provider, or, when the environment asks for SHIFT
// (SHIFT_BACKUP, or SHIFT=1), the same devices through package failover: their RC traffic
// moves to a backup NIC when the default one fails. The C side (abi34.h, register.c,
// ops_*.c, wr_ex.c) is what libibverbs calls: its own declarations of the private provider
// ABI that IBVERBS_PRIVATE_34 fixes, a constructor that registers the driver and never calls
// Go, and the verbs ops, which hand each call to an exported Go function here. Go reaches the
// devices through the verbs contract only (package verbs), so plain and SHIFT mode are one
// code path.
//
// Two kinds of device: real ConnectX devices (the command fd libibverbs opened is handed to
// package uverbs), and emulated ones (a shift:emu modalias, or a ConnectX identity with the
// device/shift_emu marker, written by `shiftctl emu up`): the process then hosts the
// emulated NIC itself (package mlx5/emu), talking RoCEv2 over UDP from the address of the
// device's GID.
//
// The Go runtime shares the process with a C program: it starts with asynchronous
// preemption off (no SIGURG on the application's threads), at most SHIFT_GOMAXPROCS (default
// 2) threads running Go at once, and refuses to open a device in a process that already runs
// another Go runtime. A child of fork (without exec) has no Go runtime: every verb fails with
// EPERM there instead of calling into Go.
package main

/*
#cgo CFLAGS: -O2 -Wall -Wno-unused-function
#cgo LDFLAGS: -ldl
#include "plugin.h"
*/
import "C"
import "github.com/shift-rdma/shift/internal/cshared"

func main() {}

func init() { cshared.LimitProcs() }
