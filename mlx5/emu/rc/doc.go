// Package rc is the Reliable Connected transport engine of the emulated ConnectX: the part of a
// NIC that turns posted work requests into RC packets and incoming RC packets into memory
// accesses, acknowledgements and completions. It segments SEND/WRITE messages at the path MTU,
// numbers packets with 24-bit PSNs, acknowledges them (coalescing allowed), retransmits go-back-N
// after the local ACK timeout, handles PSN sequence error and RNR NAKs with retry_cnt and
// rnr_retry, checks remote access through the host's memory table, executes READs and atomics
// (atomics exactly once, replaying results for retransmitted requests) and moves the QP to the
// error state with flush completions as the IBA requires.
//
// The engine is NIC-agnostic: it knows nothing of mlx5 WQE or CQE formats. The NIC model parses
// WQEs, resolves lkeys into byte slices, and hands the engine WorkRequests; it implements Host so
// the engine can reach remote-accessible memory and posted receives, and it turns the engine's
// completions into CQEs. Packets travel over a roce.Link; the NIC demultiplexes incoming packets
// by destination QPN and calls QP.HandlePacket. Time comes from a clock.Clock (real time by
// default) so tests drive timeouts deterministically with clock.Manual.
//
// # What is modelled, and how it differs from a ConnectX
//
// Modelled: PSNs per packet with 24-bit wrap; FIRST/MIDDLE/LAST/ONLY segmentation of SEND and
// WRITE at the path MTU (immediate on LAST/ONLY, RETH on FIRST/ONLY, SE on the last packet);
// one READ request consuming a PSN per expected response packet; ACK requests on the last
// packet of each message and every 64 packets of long ones; at most 256 PSNs outstanding;
// completions in posting order, READs and atomics completed by their responses, which also
// implicitly acknowledge earlier requests; go-back-N from the oldest unacknowledged PSN after
// the local ACK timeout (4.096 µs × 2^timeout, measured from the last forward progress);
// retry_cnt and rnr_retry counters restored on progress, rnr_retry 7 infinite; one PSN
// sequence error NAK per gap; RNR NAK with the responder's min_rnr_timer code and the IBA
// timer table; implicit NAK (an ACK beyond an unanswered READ) and out-of-order responses
// retransmitting once per episode; responder duplicates: SEND/WRITE re-ACKed without
// execution, READ executed again, atomics replayed from the last max_dest_rd_atomic results
// and dropped when older; class C responder errors (invalid request, remote access) NAKed and
// the responder QP moved to ERR; requester errors completing the failing WR with its status,
// flushing the rest with WR_FLUSH_ERR and moving the QP to ERR; fence and max_rd_atomic.
//
// Differences from a ConnectX: PSN sequence errors count against retry_cnt, as rdma_rxe does;
// retry_cnt 7 means seven retries (rdma_rxe treats it as infinite); the responder executes a
// READ at once, so max_dest_rd_atomic limits only the atomic replay buffer and an excess of
// outstanding READs is never NAKed; no end-to-end credits (ACKs carry the "invalid credit"
// code) and no MSN check at the requester; atomics operate in host byte order (the mode the
// mlx5 driver selects when the device supports it), as CPU atomics when 8-byte aligned; the
// source IP and P_Key of incoming packets are not checked (the NIC demultiplexes by QPN).
package rc
