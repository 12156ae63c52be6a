// Command kernelso is the emulated kernel for C programs, built with
// `go build -buildmode=c-shared` into libmlx5-emu-kernel.so (make emu-kernel) and loaded with
// LD_PRELOAD: it serves the /dev/infiniband/uverbsN devices of an emulated sysfs tree
// (`shiftctl emu up -identity connectx`) to whatever verbs provider the program uses, Debian's
// libmlx5 in the first place. The C side (interpose.c) replaces open, openat, ioctl, write,
// mmap, munmap and close: calls on the emulated devices' paths, command descriptors and UAR
// mappings go to the Go side here, which answers them from package emu (the emulated mlx5_ib
// driver, NIC, RC engine and RoCEv2-over-UDP link; package emuhost hosts the devices); every
// other call goes to the C library untouched. Completion channels and async event files are
// real descriptors, read and polled without interposition.
//
// A provider nobody here wrote then runs on the emulated ConnectX: what libmlx5 asks of a
// kernel and a NIC the emulator must answer as mlx5_ib and a ConnectX do.
//
// The library holds a Go runtime, so it cannot share a process with libmlx5-shift (which
// refuses to open a device there); asynchronous preemption is off and at most
// SHIFT_GOMAXPROCS (default 2) threads run Go, as in the plugin.
package main

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -ldl
*/
import "C"
import "github.com/shift-rdma/shift/internal/cshared"

func main() {}

func init() { cshared.LimitProcs() }
