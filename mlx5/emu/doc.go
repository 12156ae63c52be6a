// Package emu is the emulated ConnectX: an emulated uverbs kernel driver for mlx5, the NIC
// behind it (rings read in PRM format, doorbells, CQE64 writes, completion events), a real RC
// transport (MTU segmentation, PSNs, ACKs, retransmission, RNR, remote access checks, atomics
// executed once), and a fabric that carries packets either in-process with fault hooks or as
// RoCEv2 over UDP between network namespaces.
//
// It sits behind the same uverbs.File interface as the real kernel and imports only the uverbs
// and mlx5 packages (and its own subpackages); it never imports provider, failover, fence or
// probe (TestLayerRule enforces this).
//
// This package is the kernel side. A File decodes the bytes the real kernel receives: the
// RDMA_VERBS_IOCTL methods rdma-core 44 uses for mlx5 (GET_CONTEXT, ASYNC_EVENT_ALLOC,
// QUERY_PORT, QUERY_GID_TABLE/ENTRY, PD/MR destroy, CQ and QP create/destroy) and the legacy
// and extended write() commands (GET_CONTEXT, QUERY_DEVICE, QUERY_PORT, ALLOC/DEALLOC_PD,
// REG/DEREG_MR, CREATE_COMP_CHANNEL, CREATE/DESTROY_CQ, CREATE/MODIFY/QUERY/DESTROY_QP), with
// the mlx5 driver data of rdma/mlx5-abi.h (alloc_ucontext bfregs and UAR pages, create_cq user
// buffer and doorbell record, create_qp rings and bfreg). It keeps one handle table per file
// (ENOENT for a missing handle, EINVAL for one of another type, on both command paths as
// kernels with commit 81f8f7454ad9 answer), enforces
// ib_modify_qp_is_ok's RC state table and attribute masks and mlx5_ib's range checks (EINVAL),
// refuses to destroy a PD with MRs or QPs or a CQ with QPs (EBUSY), maps UAR pages at mlx5's
// mmap offsets, and delivers completion events and async events (port active/error, CQ error,
// affiliated QP errors) on real descriptors that poll and read like the kernel's event files.
//
// Construction: NewDevice creates one HCA over roce.Links (Device.Register makes it visible
// to uverbs.Devices and uverbs.Open, as emlx5_N); NewCluster builds N hosts × M NICs × P
// ports on one in-process fabric, port p of NIC n on host h at 10.n.(p-1).(h+1) with the
// RoCEv2 GID ::ffff:10.n.(p-1).(h+1). Package emutest holds the fixtures the tests use.
//
// Known differences from a ConnectX under mlx5_ib: one GID per port (index 0, RoCEv2 over
// IPv4); bfregs go to QPs as mlx5_ib's alloc_bfreg gives them (low-latency ones dedicated,
// then medium-latency ones shared, else bfreg 0), but on a shared register a WQE advertised in
// the doorbell record and not yet rung may run early (package nic explains why); MRs must be
// registered at iova == address; no SRQ, UD/UC/XRC, SQD, CQE compression,
// 128-byte CQEs, dynamic UARs, ODP or memory windows; out-of-range timeout/retry/RNR values are
// refused with EINVAL where mlx5 would truncate them.
package emu
