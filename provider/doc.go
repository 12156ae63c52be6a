// Package provider is SHIFT's plain mlx5 verbs provider in Go: devices, contexts, protection
// domains, memory regions, completion channels and queues, and RC queue pairs, built on the
// kernel ABI of package uverbs and the PRM formats, rings and doorbells of package mlx5. It
// works alone (no failover) against a real ConnectX through /dev/infiniband/uverbsN and against
// the emulated ConnectX of package mlx5/emu, which sits behind the same uverbs.File.
//
// The control path (create, modify, query, destroy) follows rdma-core's providers/mlx5
// (verbs.c sizing, mlx5.c context set-up, dbrec.c doorbell records). The data path (PostSend,
// PostRecv, Poll) follows qp.c and cq.c: it writes WQEs straight into the send and receive
// rings, rings the doorbell with the post_send_db sequence, and parses CQE64s; it allocates
// nothing, takes no lock in the common case and makes no system call. Unlike libmlx5 a WR
// list is validated as a whole before any WQE is written, so a failed post leaves nothing
// half-posted.
//
// The package also exposes the ring operations SHIFT's failover layer builds on: the
// outstanding WQEs of a queue with their wr_ids, posting without ringing the doorbell, ringing
// up to an index, copying a WQE into another QP's ring, and resetting a QP for reuse.
package provider
