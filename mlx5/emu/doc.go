// Package emu is the emulated ConnectX: an emulated uverbs kernel driver for mlx5, the NIC
// behind it (rings read in PRM format, doorbells, CQE64 writes, completion events), a real RC
// transport (MTU segmentation, PSNs, ACKs, retransmission, RNR, remote access checks, atomics
// executed once), and a fabric that carries packets either in-process with fault hooks or as
// RoCEv2 over UDP between network namespaces.
//
// It sits behind the same uverbs.File interface as the real kernel and imports only the uverbs
// and mlx5 packages; it never imports provider, failover, fence or probe.
package emu
