// Package mlx5 owns the bytes that cross into an NVIDIA ConnectX NIC: the PRM work-queue
// segments (control, remote address, atomic, data, inline), CQE64, doorbell records, UAR
// doorbell and BlueFlame writes, and the mlx5 driver data (rdma/mlx5-abi.h) that travels inside
// uverbs commands. Everything is written in big-endian with explicit byte order into memory the
// NIC reads; Go structs are never cast onto NIC-visible memory. The doorbell sequence follows
// rdma-core's providers/mlx5 post_send_db, with barriers in per-architecture files.
//
// Encoders are checked byte for byte against the static inline encoders of
// <infiniband/mlx5dv.h>; the ring code knows nothing about the provider or SHIFT.
package mlx5
