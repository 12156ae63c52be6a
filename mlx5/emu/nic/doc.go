// Package nic is the hardware half of the emulated ConnectX: what the NIC does with the memory
// the provider and the kernel set up. A Device has ports bound to fabric links (each with the
// RoCEv2 GID of its link's address), UAR pages whose doorbell and blue-flame registers a
// watcher goroutine polls with atomic loads (adaptive: spinning briefly after activity, then
// sleeping up to a millisecond), memory keys (registered regions with PD and access rights),
// completion queues into which it writes CQE64s with the ownership bit in the PRM format, and
// RC queue pairs whose send queues it reads in PRM format from the provider's ring memory once
// — and only once — a doorbell was written to the QP's UAR register. Valid WQEs become work
// requests for the RC transport engine (package rc) after their lkeys are checked; invalid
// ones complete with the syndrome the hardware reports and move the QP to ERR. Incoming
// packets are demultiplexed by destination QPN to the engines; the engines reach registered
// memory, posted receives and the CQs through the device.
//
// The emulated kernel driver (package emu) calls this API to create objects on uverbs commands
// and turns the device's callbacks (port state, CQ events and errors, QP errors) into uverbs
// events. Formats come from package mlx5; nothing here knows about the provider or SHIFT.
package nic
