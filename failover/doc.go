// Package failover is SHIFT's passive fallback layer: the same verbs surface as package
// provider (Context, PD, MR, CQ, QP, PostSend, PostRecv, Poll) over a default mlx5 device and
// backup devices of the same host, used in order (a QP whose backup fails too moves to the
// next one, bkset.go; what failed on a backup is rebuilt once its link is up, rearm.go).
// Every control verb runs on the default device at once
// and is recorded, with its attributes, for one background goroutine per backup device that
// replays it on the backup (shadow objects), best-effort in list order and rescanning when a
// peer's attribute is not yet in the KV store (package failover/kv). The data path in the
// Default state is the provider's behind one gate, allocation-free and lock-free.
// When a default QP fails (an error completion or a failed post), the QP falls back: the
// completions already produced are kept for the application, the outstanding WRs are checked
// to be retransmission-safe (no atomic, no WR posted with SendIneligible), the outstanding
// receives are reposted on the backup QP, both sides exchange their receive counters with a
// zero-length WRITE_WITH_IMM on the backup QPs, and the sends the peer has not received are
// reposted on the backup QP with local and remote keys rewritten and their wr_ids kept. The
// application sees no error; when the fallback is not safe it sees the original error, as
// without SHIFT.
//
// Recovery (issue 6, recover.go): while a QP's sends are on the backup, a goroutine per QP
// reconnects the reset default QP with the PSNs and attributes queried at RTR and RTS and
// probes it with a signaled zero-length WRITE every Options.ProbeInterval
// (default 100 ms; the plugin's SHIFT_PROBE_INTERVAL), doubling after each failed probe up to
// Options.ProbeMaxInterval (2 s); a failed probe resets the default QP again. After a
// successful probe (WaitSignaled) the application's next signaled WR is posted on the backup
// as the fence WR (package fence); the recovery notification (WRITE_WITH_IMM) and every later
// WR are written on the default QP with the doorbell withheld (WaitDrained) until the fence
// WR completes; the notification is released alone, the rest once it completed (Default). If
// no signaled WR comes within Options.FenceAfter or Options.FenceAfterWRs WRs
// (default 64 WRs or 10 ms; the plugin's SHIFT_FENCE_AFTER="<n>,<duration>"), SHIFT posts its own
// signaled zero-length WRITE as the fence. The receiver, on the notification, polls the
// backup CQ until its receive counter reaches the count the notification carries (the
// messages the peer sent up to its fence WR: acknowledged, but their CQEs may come after the
// notification's, recvcount.go) and reposts its outstanding receives on the default QP. Each direction recovers on its own; a later
// failure falls back again (the RECVs left on the backup are consumed by the peer's
// zero-length filler SENDs, their number carried in the fallback notification).
// SwitchToBackup and SwitchToDefault move a healthy QP on demand (paper §4.4). Stats counts
// probes, recoveries, SHIFT fences and fillers and sums switch-back times (probe success →
// Default) and stalls (fence WR posted → Default).
//
// SHIFT's fallback notifications travel on a control QP pair of their own on the backup
// NICs, so they never consume an application RECV, whatever the peer's receive state: a
// failure while the recovery notification is in doubt (rung, its completion not seen) falls
// back safely, the peer's reply telling which receives it holds where. One control QP pair
// serves every QP between two contexts on one backup device (ctlep.go): created with the
// first QP towards the peer context (named by a random control id in the QP's KV entry),
// destroyed with the context or replaced by a re-armed pair when it failed; its messages name the receiving and the sending QP, and the
// receiver acts on a message only for its QP connected to the sender's on that very pair.
package failover

// Implementation notes (where this package departs from, or fixes, the letter of
// docs/FAILOVER.md; the reasons are in the report of issue 5):
//
//   - Outstanding sends are copied WQE by WQE from the default ring (wqecopy.go): the
//     provider holds the failed WQE and those flushed behind it (SetRetainSends) and records
//     beside each WQE whether it is internal, ineligible (SendMark) and its sequence among
//     the two-sided WRs. The copy keeps the wr_id; lkeys are mapped through the MR table,
//     rkeys through the peer's entries, QPN and WQE index are the backup QP's. WRs on a
//     backup QP are logged as WRs (bkLog) for a chained failure.
//   - Transitions the data path finds run on the context's engine goroutine (engine.go), not
//     on the application's thread.
//   - The peer's MR entries are read before a fallback needs them (rkcache.go): each backup
//     device's shadow goroutine lists them (kv.Lister) when a QP towards the peer connects and
//     every second after, and reads a key a lookup missed. backupRKey does no I/O: a key not
//     in the cache is ErrBackupNotReady. A fallback round first looks up the remote keys of
//     the WRs it will rewrite; when some are missing (an MR the peer registered just before
//     the failure) it releases q.mu, reads them with the KV timeout and starts over once, so
//     no KV operation ever runs under a mutex of the data path, and a key still missing fails
//     the round closed. A post on the backup that misses a key leaves its WRs to the inbox,
//     whose drain has the key read by a goroutine of its own, then posts them (keywait.go).
//   - SHIFT's own completions on a backup QP are recognised by position: each backup QP keeps
//     the kinds (application or control) of its posted receives and of its signaled sends in
//     posting order, which is completion order on an RC QP. Only after a backup error, when a
//     CQE may stand for an unsignaled WQE, is the control wr_id used to drop SHIFT's flushes.
//   - Each side sends exactly one control message per fallback (a 24-byte inline SEND, once
//     a WRITE_WITH_IMM), on the control QP pair its context shares with the peer's context
//     on that backup device (the QP's KV entry names the owner's context, whose control
//     entry gives the pair's QPN and PSN); the receiver reposts each control RECV as it
//     completes, before handling the message.
//   - A failure is found when the application polls the error completion (as SHIFT intercepts
//     poll_cq), when a post fails, or when the peer's notification arrives on the backup CQ's
//     event goroutine; an application that never polls its send CQ does not fail over until
//     it does.
//   - The receive side of a fallback reposts the receives in [recvDone, recvPosted) from the
//     receive log, in order, behind the backup QP's control RECV.
//   - READs before the last two-sided WR the peer received are read again (their response may
//     have been lost), after that WR rather than before it.
//   - Each fallback notification carries the receive counter modulo 2^24 and the number of
//     RECVs the sender ever left stale on its backup QP (stale.go); the recovery
//     notification's immediate the two-sided count at the fence (recvcount.go).
//   - After the first fallback, the default QP's completions are classified by position too
//     (defTracked): probes, notifications and application WRs in posting order; the lock-free
//     fast paths stay closed and every call takes the QP or CQ mutex.
//   - An inline WQE carries its payload in the ring, so the copy sends what was posted even
//     if the application reused its buffer (the verbs API lets it once PostSend returns).
