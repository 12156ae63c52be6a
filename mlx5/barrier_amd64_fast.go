//go:build amd64

package mlx5

// fromDeviceAfterAtomicLoad is udma_from_device_barrier for a caller that has just observed
// the device's last write (the CQE owner byte) with a sync/atomic load. On amd64 that load is
// a plain MOV, and x86-64 never reorders a load with an older load, whatever wrote the memory
// (a CPU or a DMA master writing coherent write-back memory); the atomic load is also a
// compiler barrier, so no later read of the CQE is hoisted above it. The Linux kernel's
// dma_rmb() for x86 is likewise only a compiler barrier. rdma-core's LFENCE adds nothing
// to this ordering for loads from write-back memory; FromDeviceBarrier keeps it for callers
// of package mlx5's Poll.
func fromDeviceAfterAtomicLoad() {}
