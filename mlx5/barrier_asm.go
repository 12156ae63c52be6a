//go:build amd64 || arm64

package mlx5

// ToDeviceBarrier is udma_to_device_barrier: stores to DMA-visible host memory before it (the
// WQE) become visible to the device no later than stores after it (the doorbell record).
// amd64: stores are not reordered with older stores (TSO), so the non-inlinable call is the
// compiler barrier rdma-core uses. arm64: DMB OSHST.
func ToDeviceBarrier()

// FromDeviceBarrier is udma_from_device_barrier: reads after it (the CQE body) see the device's
// writes that preceded the write already observed (the owner bit). amd64: LFENCE. arm64:
// DMB OSHLD.
func FromDeviceBarrier()

// FlushWrites is mmio_flush_writes: it drains the write-combining buffers so a BlueFlame copy
// or doorbell leaves the CPU as one burst before anything after it, and two doorbells are never
// merged or reordered. amd64: SFENCE. arm64: DSB ST.
func FlushWrites()
