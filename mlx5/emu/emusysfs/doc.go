// Package emusysfs gives emulated ConnectX devices the kernel-visible identity that
// unmodified RDMA programs look for: a sysfs tree in the layout libibverbs scans
// (class/infiniband_verbs/uverbsN, class/infiniband/<dev> with its ports and GID table) and
// the /dev/infiniband/uverbsN command-device stand-ins libibverbs opens.
//
// libibverbs reads the tree at $SYSFS_PATH (without netlink, which a kernel without RDMA
// lacks) and opens /dev/infiniband/uverbsN, a path compiled into it. A stand-in is a symlink
// to /dev/full: a character device whose number the tree declares as 0:0 (which libibverbs
// accepts as "any"), on which every command write fails cleanly with ENOSPC. The provider
// that claims the device (libmlx5-shift, which emulates it in-process) never uses it.
//
// Each device's tree carries one port with one RoCE v2 GID (index 0, the IPv4-mapped address
// the emulated NIC binds to), as the emulator reports it, and the rest of the 256-entry GID
// table zero, as the kernel shows unpopulated entries. The identity is either shift:emu (a
// modalias only libmlx5-shift matches) or a ConnectX-6 PCI identity with the marker file
// device/shift_emu, so that programs that link Debian's libmlx5 see a ConnectX.
package emusysfs
