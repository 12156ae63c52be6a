// Package sim runs the emulated ConnectX and the provider's data path under one seeded
// scheduler on a virtual clock (issue 14's deterministic simulation, first part).
//
// A World is two emulated hosts built stepped (emu.ClusterConfig.Stepped): no NIC watcher, no
// fabric delivery goroutine, RC timers and fabric delays on a clock.Manual. Every step the
// scheduler draws, from the seed, one thing to run on its own goroutine: an application
// operation (a post of a WRITE, SEND, READ or atomic on one of several QPs sharing a
// CQ, a receive, a poll), one pass of a NIC, the delivery of a due packet, or a move of the
// clock; faults (packet loss, delay and reordering, a link down for less or more than the RC
// retry reach; over the failover layer a backup path's short downs at least flapGap apart,
// and the last backup path's random loss at most lastPathLoss, so that RC rides out what
// that path, the one kept alive, meets) are drawn from the same seed. Everything the
// application observes goes into a trace whose hash is the run's fingerprint: the same seed
// gives the same trace, and a failing seed replays exactly (a Violation prints the command).
//
// Invariants checked as completions arrive, every step and at the end: completions in posting
// order, each once; a SEND's payload is the next one in order, intact, at its receiver; a
// WRITE's data is in place when its completion arrives; a READ returns what the peer holds; no
// success after a QP's first error; every atomic acknowledged ran once, in order: it returns
// the sum of the adds posted before it, and the counter equals the sum of the adds that
// completed, exactly when the QP never failed (half the runs post CMP_AND_SWP instead of
// FETCH_AND_ADD, swapping the counter from that sum to it plus the add: risky.go, drawCAS); every
// signaled WR completes before the run ends, and a world in which nothing can run and no timer
// or packet is pending while a signaled WR or an expected receive is outstanding is stuck at
// once (stuck.go, ErrStuck).
//
// Over the failover layer (Config.Failover) each host has a default NIC and one or two
// backups, and the contexts are stepped (failover.Options.Stepped): the engine, the shadow
// verbs, the probes, the completion watchdog and the async events run in Context.Step and on
// the virtual clock. A link down past the RC reach costs the application nothing. A quarter
// of the seeds also post FETCH_AND_ADD and WRs flagged failover.SendIneligible, which the
// layer must not retransmit (risky.go): a fallback that goes through left none of them to the
// backup (every add posted ran once, every ineligible WRITE and READ had run), a refusal comes
// only with one outstanding, and error completions come only on a pair so refused, once its
// QP failed. Memory stays bounded (memory.go): the failover QPs' and CQs' queues within a
// bound of their capacity, and, across seeds, the live Go heap (heap_test.go).
//
// Besides the fabric's faults, each run draws from a second stream of its seed (faults.go),
// so that a seed drawing none runs as before and the replay command replays them all:
//
//   - nicfault.go: a default NIC dying (DEVICE_FATAL) or hanging silently (the watchdog, or
//     the peer's retry timer and the drain's hang bound, must find it; in half of the hang
//     runs the peer posts nothing), and, with two backups, a backup dying or hanging after
//     the first fallback (its QPs chain to the second; a hang never while that NIC holds
//     receive CQEs back, latecqe.go: messages it acknowledged and never completes are lost
//     beyond any transparent failover);
//   - kvfault.go: the KV store down or slow (a call takes virtual time while the world runs,
//     or fails as past KVTimeout), during the set-up or around a fallback;
//   - pause.go: one host's application and context not stepped for 1 to 80 ms around a
//     fallback, its NICs running on (shorter than HandshakeTimeout, the watchdog's bound,
//     and what the peer's transport retries survive of RNR under loss), or, in a quarter of
//     those runs, for 2.1 to 3 s, past the peer's HandshakeTimeout: the pairs' errors are
//     then allowed (the peer fails a QP whose round got no reply, as documented), and
//     nothing may be duplicated, reordered or left without a completion; the step budget
//     does not run out while a host is paused, and gives it half a budget once it resumes;
//   - recvonly.go: in a quarter of the recovery runs, pair 0's QP on host 1 left in RTR (it
//     never sends), as perftest's bandwidth servers leave theirs: the run ends only once it
//     and its peer are Default in both directions (or its peer was stopped by the
//     application: it then stays on the backup, as a plain responder learns nothing);
//   - latecqe.go: in a quarter of the runs, the receive CQEs of a backup QP whose receive
//     side is on the backup held back 20 µs to 2 ms after their messages were acknowledged
//     (as a responder may write its CQE after its ACK, and two NICs' CQEs come in no order).
//   - ctldrop.go: in a quarter of the failover runs, one round notification or reply
//     dropped on arrival, as a peer drops one for a QP whose backup set is not connected
//     to the sender's (the first to the eighth delivered in the run): the notification is
//     sent again (failover/notifyresend.go), or the peer's own round answers for it.
//
// The application itself, in streams of their own: in half the failover runs it queries QPs
// (query.go: the state must be the application's while SHIFT keeps the QP running), and in a
// quarter it moves one QP to ERR and in half of those then destroys it (stop.go: the QP fails
// as without SHIFT, its pair's errors are allowed, and nothing is left without a completion),
// and, with Config.Shapes (TestFailoverSeeds and the scans; not the seeds pinned before it),
// in a quarter its QPs allow the peer only RDMA READ, only RDMA WRITE, READ and atomics, or no
// remote access at all, and it posts only what they allow (access.go: SHIFT's probes,
// zero-length WRITEs, must still bring QPs back), and in a quarter its QPs keep 256 receives
// posted and one send outstanding, with a send CQ of their own polled only while a send
// waits (deep.go: ib_send_lat's shape, where SHIFT's fillers must not overrun the backup's
// send CQ).
//
// For all of them the invariant is the link down's: no error completion (but on a pair
// refused for an unsafe WR or stopped by the application), nothing lost, duplicated or
// reordered. The run waits for its
// drawn faults to begin; with recovery it does not wait for QPs to come back to a dead or
// hung default NIC.
//
// Not simulated yet: completion channels.
package sim
