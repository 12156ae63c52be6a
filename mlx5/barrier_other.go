//go:build !amd64 && !arm64

package mlx5

import "sync/atomic"

// On architectures without a hand-written barrier file a sequentially consistent atomic
// operation stands in for every barrier: Go implements it with a full fence, which is at
// least as strong as each udma_* barrier. Real NIC support is only claimed on amd64 and arm64.

var fence atomic.Uint32

// ToDeviceBarrier is udma_to_device_barrier (full fence fallback).
func ToDeviceBarrier() { fence.Add(1) }

// FromDeviceBarrier is udma_from_device_barrier (full fence fallback).
func FromDeviceBarrier() { fence.Add(1) }

// FlushWrites is mmio_flush_writes (full fence fallback).
func FlushWrites() { fence.Add(1) }
