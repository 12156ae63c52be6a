//go:build !amd64

package mlx5

// fromDeviceAfterAtomicLoad is udma_from_device_barrier after a sync/atomic load observed the
// device's last write. Outside amd64 the full barrier stays: on arm64 Go's atomic load is a
// load-acquire, but rdma-core and the kernel (dma_rmb) order reads of DMA-written memory with
// DMB OSHLD, which covers the outer-shareable domain the device is in.
func fromDeviceAfterAtomicLoad() { FromDeviceBarrier() }
