// Package uverbs is the kernel ABI layer of SHIFT: it owns every byte that crosses into the
// RDMA subsystem of the Linux kernel. It discovers devices in sysfs, opens the uverbs character
// device, marshals the two command paths the kernel offers (RDMA_VERBS_IOCTL with its attribute
// array, and the legacy write() commands with plain and extended headers), and reads
// asynchronous and completion events from their file descriptors.
//
// Structs mirror the uapi headers rdma/ib_user_verbs.h, rdma/ib_user_ioctl_cmds.h and
// rdma/ib_user_ioctl_verbs.h; their layouts are checked against those headers by a cgo test.
// The real backend is a *os.File on /dev/infiniband/uverbsN; an emulated kernel driver
// (package mlx5/emu) implements the same File interface and decodes the very same bytes.
// Nothing in this package knows about mlx5 rings, the provider or SHIFT.
package uverbs
