// Package sim runs the emulated ConnectX and the provider's data path under one seeded
// scheduler on a virtual clock (issue 14's deterministic simulation, first part).
//
// A World is two emulated hosts built stepped (emu.ClusterConfig.Stepped): no NIC watcher, no
// fabric delivery goroutine, RC timers and fabric delays on a clock.Manual. Every step the
// scheduler draws, from the seed, one thing to run on its own goroutine: an application
// operation (a post of a WRITE, SEND, READ or FETCH_AND_ADD on one of several QPs sharing a
// CQ, a receive, a poll), one pass of a NIC, the delivery of a due packet, or a move of the
// clock; faults (packet loss, delay and reordering, a link down for less or more than the RC
// retry reach) are drawn from the same seed. Everything the application observes goes into
// a trace whose hash is the run's fingerprint: the same seed gives the same trace, and a
// failing seed replays exactly (a Violation prints the command).
//
// Invariants checked as completions arrive, every step and at the end: completions in posting
// order, each once; a SEND's payload is the next one in order, intact, at its receiver; a
// WRITE's data is in place when its completion arrives; a READ returns what the peer holds; no
// success after a QP's first error; every FETCH_AND_ADD acknowledged ran once (the counter
// equals the sum of the adds that completed, exactly when the QP never failed); every
// signaled WR completes before the run ends, and a world in which nothing can run and no timer
// or packet is pending while a signaled WR or an expected receive is outstanding is stuck at
// once (stuck.go, ErrStuck).
//
// Over the failover layer (Config.Failover, with Recovery and Backups): a link down past the
// RC reach costs the application nothing. A quarter of the seeds also post FETCH_AND_ADD and
// WRs flagged failover.SendIneligible, which the layer must not retransmit (risky.go): a
// fallback that goes through left none of them to the backup (every add posted ran once, every
// ineligible WRITE and READ had run), a refusal comes only with one outstanding, and error
// completions come only on a pair so refused, once its QP failed. Memory stays bounded
// (memory.go): the failover QPs' and CQs' queues within a bound of their capacity, and, across
// seeds, the live Go heap (heap_test.go).
//
// Not simulated yet: the failover layer's link watcher and async events (a stepped context
// reads neither) and completion channels.
package sim
