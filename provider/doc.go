// Package provider is SHIFT's plain mlx5 verbs provider in Go: devices, contexts, protection
// domains, memory regions, completion channels and queues, and RC queue pairs, built on the
// kernel ABI of package uverbs and the PRM formats, rings and doorbells of package mlx5. It
// works alone (no failover) against a real ConnectX through /dev/infiniband/uverbsN and against
// the emulated ConnectX of package mlx5/emu, which sits behind the same uverbs.File.
//
// The control path (create, modify, query, destroy) follows rdma-core's providers/mlx5:
// mlx5_init_context (alloc_ucontext request, UAR pages mapped one by one, bfreg table with
// need_uuar_lock), verbs.c sizing (mlx5_calc_sq_size/mlx5_calc_rq_size, so a QP reports the
// same caps libmlx5 would), mlx5_create_cq (a power of two of 64-byte CQEs, all invalid and
// hardware-owned), and modify-to-RESET cleaning the CQs and ring indices. The data path
// (PostSend, PostRecv, Poll) follows qp.c and cq.c: it builds WQEs straight into the send and
// receive rings, rings the doorbell with the post_send_db sequence (BlueFlame for a single
// small inline WQE on a BlueFlame-capable bfreg), and parses CQE64s. It allocates nothing and
// makes no system call; it takes no lock except a bfreg lock when the kernel handed the QP a
// shared (medium) bfreg, as libmlx5 does. Unlike libmlx5, a WR list is validated as a whole
// before any WQE is written, so a failed post leaves nothing half-posted.
//
// Concurrency: posts on one QP must be serialised by the caller (libmlx5's sq.lock / rq.lock),
// as must polls of one CQ; posting and polling may run concurrently. Modify to RESET and
// Destroy clean the QP's completions out of its CQs and must not run concurrently with Poll
// on those CQs.
//
// Memory: MRs and rings must not move or be freed while the NIC may access them. Buffer is
// mmap-backed memory outside the Go heap for exactly that; caller memory from the Go heap must
// be pinned (runtime.Pinner) for the MR's lifetime.
//
// For SHIFT's failover layer the package exposes the ring operations it builds on: the
// outstanding WQEs of a queue with their wr_ids (OutstandingSends, OutstandingRecvs, RecvSGL,
// SendWRID, ReadSendWQE), posting without ringing the doorbell (PostSendNoDoorbell), ringing up
// to a position (RingSendDoorbell), copying a WQE into another QP's ring with key rewrites
// (CopySendWQE), and resetting a QP for reuse (Reset).
package provider
