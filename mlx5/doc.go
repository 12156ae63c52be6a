// Package mlx5 owns the bytes that cross into an NVIDIA ConnectX NIC: the PRM work-queue
// segments (control, remote address, atomic, data, inline), CQE64, doorbell records, UAR
// doorbell and BlueFlame writes, and the mlx5 driver data (rdma/mlx5-abi.h) that travels inside
// uverbs commands. Everything is written in big-endian with explicit byte order into memory the
// NIC reads; Go structs are never cast onto NIC-visible memory. The doorbell sequence follows
// rdma-core's providers/mlx5 post_send_db, with barriers in per-architecture files.
//
// Every format has an encoder (Put) and a decoder (Decode*), because two parties use them: the
// provider writes WQEs and parses CQEs, the emulated ConnectX parses WQEs and writes CQEs. The
// rings (SQ, RQ, CQ) work over memory the caller mapped and serve both sides too: Begin/Finish
// and BFReg.Ring for the producer of send WQEs, Parse for the device; Publish for the producer
// of CQEs, Poll/UpdateCI/Arm for the consumer. Words another agent reads concurrently (doorbell
// records, UAR registers, the last word of each CQE) are accessed with sync/atomic, so the
// ordering that barriers give a real NIC is also a happens-before edge for a device model
// running in another goroutine.
//
// Encoders are checked byte for byte against the static inline encoders of
// <infiniband/mlx5dv.h> and the struct layouts of <rdma/mlx5-abi.h> (package
// mlx5/internal/dvoracle, cgo, test only); the ring code knows nothing about the provider or
// SHIFT.
package mlx5
