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
// Invariants checked as completions arrive and at the end: completions in posting order,
// each once; a SEND's payload is the next one in order, intact, at its receiver; a WRITE's
// data is in place when its completion arrives; a READ returns what the peer holds; no
// success after a QP's first error; every FETCH_AND_ADD acknowledged ran once (the counter
// equals the sum of the adds that completed, exactly when the QP never failed); every
// signaled WR completes before the run ends (nothing stuck).
//
// Not simulated yet: the failover layer (its engine, probes, timers and backup event loops
// still run on goroutines and the wall clock) and completion channels.
package sim
