// Package nic is the hardware half of the emulated ConnectX: what the NIC does with the memory
// the provider and the kernel set up. A Device has ports bound to fabric links (each with the
// RoCEv2 GID of its link's address), UAR pages whose doorbell and blue-flame registers a
// watcher goroutine polls with atomic loads, memory keys (registered regions with PD and access
// rights), completion queues into which it writes CQE64s in PRM format with the ownership bit,
// and RC queue pairs whose send queues it reads in PRM format from the provider's ring memory
// once — and only once — a doorbell was written to the QP's UAR register. Valid WQEs become
// work requests for the RC transport engine (package rc) after their lkeys are checked;
// invalid ones complete with the syndrome the hardware reports and move the QP to ERR.
// Incoming packets are demultiplexed by destination QPN to the engines; the engines reach
// registered memory, posted receives and the CQs through the device.
//
// The emulated kernel driver (package emu) calls this API to create objects on uverbs commands
// and turns the device's callbacks (port state, CQ events and errors, QP errors and
// asynchronous events) into uverbs events. The device reads WQEs and doorbells and writes
// CQEs with code of its own (prm_wqe.go, prm_cqe.go), from the PRM layouts; only constants
// come from package mlx5, whose ring code the providers use, so that a mistake in one is seen
// by the other (prm_test.go runs them against each other, TestEmulatorDecodesRingsItself in
// package emu keeps it so). Nothing here knows about the provider or SHIFT.
//
// How the model follows a ConnectX, and where it cannot:
//
//   - Doorbells. Hardware receives every MMIO write as its own transaction; the model sees a
//     register only as memory. It consumes each register write by swapping it with zero, and
//     executes a send queue from its consumer index up to the send counter of the doorbell
//     record, so a QP's own doorbells may overwrite one another harmlessly. A register is
//     either dedicated to one QP (mlx5_ib's low-latency bfregs) or shared by any number
//     (the medium-latency bfregs and bfreg 0, CreateQP with SharedBfreg). On a shared register
//     two QPs can overwrite each other's doorbell between two polls, so the device picks the
//     QP by the QPN the doorbell carries (the control segment's qpn_ds) and, on every doorbell
//     it sees there and on every pass while a QP of the register still has work, re-checks
//     every QP bound to the register against its doorbell record, the producer counter the
//     hardware reads after a doorbell. No doorbell is lost; the price is that on a shared
//     register a WQE whose doorbell record was updated but whose UAR write has not happened
//     yet may execute early (a ConnectX would wait for that write). The provider never
//     updates the record without ringing right after (RingFast: record, then the register
//     write under the register's lock), and the
//     WQEs SHIFT withholds are written to the ring without touching the record, so
//     withholding stays exact on shared registers as on dedicated ones. The CQ arm doorbell is
//     shared by all CQs of a page, as on hardware; a hidden arm is recovered from the CQ's arm
//     doorbell record, which the device marks "never armed" at creation (its only write to a doorbell record).
//   - Execution follows the doorbell record only after a doorbell: a WQE written and advertised
//     in the record but not rung never runs on a dedicated register (on a shared one see
//     above); a WQE written but not advertised in the record never runs on any register. Receives need no doorbell (mlx5 posts them with
//     the record alone). A QP in INIT or RTR keeps rung WQEs until RTS; RESET zeroes the
//     device's ring indexes.
//   - Completions keep send-queue order: a WQE the device completes itself (NOP, validation
//     error) waits until the engine has completed the WQEs before it. Unsignaled WQEs produce a
//     CQE only on error; every WQE flushed by ERR produces a flush CQE.
//   - CQ events: an arm raises one event for the next CQE that satisfies it (solicited-only
//     arms: a receive with the SE bit, or an error), or at once when such a CQE is already past
//     the consumer index the arm carries; an arm repeating the last one (same sequence number,
//     command and index) is ignored. A CQ without a free entry overruns: the CQ error callback
//     runs once and the CQ takes no more CQEs (the QPs using it are not moved to ERR).
//   - Adaptive polling: the watcher spins (yielding) for 50 µs after activity when the scanner
//     found its doorbells, and not at all when their writers wake it themselves (a spin then
//     only holds a processor the rest of the process needs); then it parks, and the process's
//     one idle scanner (scanner.go) watches the registers of every parked device with a
//     period doubling from 100 µs (a timerfd) to 1 ms (a Go timer), back to 100 µs
//     whenever a device parks, a port changes state, a QP fails or a CQE raises an event or
//     reports an error (software answers those by posting). Idle CPU does not grow with
//     devices or QPs (about 5 % of a core for the process on the 2-core CI VM). A doorbell
//     written through package mlx5 (the Go provider and SHIFT) wakes a parked watcher at once
//     (mlx5.UARWaker, the model's stand-in for the MMIO write reaching the NIC; p50 5.5 µs
//     after 5 ms idle); one written by C (the plugin's fast path, Debian's libmlx5) or by a
//     context opened provider.Options.NoDeviceWake (the plugin's) waits for the scanner: up
//     to about 1.1 ms after a long idle period (more on a loaded machine), 0.1–0.2 ms shortly
//     after activity (docs/PERFORMANCE.md, "Emulator wake-up").
//   - Validation is at least as strict as the hardware's: a WQE whose control segment names
//     another QPN fails with LOC_QP_OP_ERR (a ConnectX identifies the QP by the doorbell and
//     may not check WQEs it fetches), so a provider that copies WQEs between QPs must rewrite
//     the QPN, as it must for BlueFlame writes anyway.
//   - Vendor syndromes in error CQEs are the values ConnectX firmware is seen to report where
//     known (0x81 retry exceeded, 0x88 remote access, 0x51 local protection), else 0.
//   - Device failure (fatal.go). Kill is a ConnectX's fatal error: nothing executes any more,
//     no CQE is written and no packet sent or received, the kernel side raises
//     IBV_EVENT_DEVICE_FATAL then PORT_ERR (its ports go down and stay down), and the commands
//     that create or change objects fail with EIO while destroys and the moves of a QP to
//     ERR or RESET succeed, as mlx5_cmd_exec answers them in internal error. The driver's
//     software flush of kernel QPs has no user space counterpart and is not modelled: user
//     CQs get nothing. Hang stops the device the
//     same way but silently: no event, ports up, commands answered.
//   - A receive WQE the device cannot scatter into (bad lkey) completes with a local error and
//     the QP goes to ERR; the requester sees RNR NAKs meanwhile rather than a NAK, a
//     simplification of the IBA responder behaviour.
package nic
