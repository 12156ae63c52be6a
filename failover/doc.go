// Package failover is SHIFT's passive fallback layer: the same verbs surface as package
// provider (Context, PD, MR, CQ, QP, PostSend, PostRecv, Poll) over a default mlx5 device and
// a backup device of the same host. Every control verb runs on the default device at once
// and is recorded, with its attributes, for one background goroutine per backup device that
// replays it on the backup (shadow objects), best-effort in list order and rescanning when a
// peer's attribute is not yet in the KV store (package failover/kv). The data path in the
// Default state is the provider's plus a WR log and counters, allocation-free and lock-free.
// When a default QP fails (an error completion or a failed post), the QP falls back: the
// completions already produced are kept for the application, the outstanding WRs are checked
// to be retransmission-safe (no atomic, no WR posted with SendIneligible), the outstanding
// receives are reposted on the backup QP, both sides exchange their receive counters with a
// zero-length WRITE_WITH_IMM on the backup QPs, and the sends the peer has not received are
// reposted on the backup QP with local and remote keys rewritten and their wr_ids kept. The
// application sees no error; when the fallback is not safe it sees the original error, as
// without SHIFT. Recovery to the default NIC is package work for later (issue 6); the states
// for it exist.
package failover
