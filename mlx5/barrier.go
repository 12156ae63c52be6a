package mlx5

// Memory barriers of rdma-core's util/udma_barrier.h, one assembly implementation per
// architecture (barrier_amd64.s, barrier_arm64.s). They order this CPU's accesses to memory
// the NIC reaches by DMA and to the write-combining UAR mapping; the sync/atomic accesses used
// for the words another goroutine reads order them for the Go memory model as well.

// WCStart is mmio_wc_start: it orders everything written before it (the doorbell record)
// ahead of the following write-combining stores to the UAR. It is FlushWrites, as in
// rdma-core.
func WCStart() { FlushWrites() }
