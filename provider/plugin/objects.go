package main

/*
#include "plugin.h"
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The Go objects behind the C ones. Each C object holds the cgo.Handle of its Go object; the
// data-path scratch (WR and WC slices) is preallocated per object, so a post or poll
// allocates nothing.

type devctx struct {
	sctx *C.struct_shift_context // the C context (C memory), for the C data path's tables
	name string
	emu  bool
	v    verbs.Context
	prov *provider.Context // the plain provider, or SHIFT's default context
	fo   *failover.Context // SHIFT mode
	// sigRelease ends this context's part in keeping the application's signal handlers off
	// the Go runtime's stacks (cshared.KeepHandlersOnStack).
	sigRelease func()
	mu         sync.Mutex // guards imported
	// imported are the kernel completion channels libibverbs created on the command fd
	// (hardware, plain mode), wrapped once each.
	imported map[*C.struct_ibv_comp_channel]verbs.CompChannel
	qps      sync.Map // QPN → *qp, for diagnostics
}

type pd struct {
	ctx *devctx
	v   verbs.PD
}

type mr struct{ v verbs.MR }

type cq struct {
	ctx *devctx
	v   verbs.CQ
	wcs []verbs.WC
	// pin holds the memory the C poller of SHIFT mode reads (spost.go) until destroy.
	pin runtime.Pinner
}

type qp struct {
	ctx  *devctx
	v    verbs.QP
	cap  verbs.QPCap
	swrs []verbs.SendWR
	rwrs []verbs.RecvWR
	// errWCs counts the error completions the application polled on the QP, for
	// SHIFT_DEBUG=1: the first is printed, later flushes only counted (debugWC).
	errWCs atomic.Uint64
	// pin holds the memory the C poster of SHIFT mode writes (spost.go) until destroy.
	pin runtime.Pinner
}

type channel struct {
	ctx *devctx
	v   verbs.CompChannel
}

func handleOf(v any) C.uintptr_t { return C.uintptr_t(cgo.NewHandle(v)) }

func valueOf[T any](h C.uintptr_t) T { return cgo.Handle(h).Value().(T) }

func release(h C.uintptr_t) { cgo.Handle(h).Delete() }
