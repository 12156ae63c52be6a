// Package vmtest is SHIFT's real-kernel test tier: it boots a stock Linux kernel (Debian's 6.1
// image, which ships rdma_rxe) under QEMU, creates a Soft-RoCE device rxe0 over a dummy netdev
// and runs static Go test binaries and guest commands against the kernel's real uverbs ABI.
//
// The kernel package is fetched with apt-get download and unpacked with dpkg-deb -x into a
// cache directory (SHIFT_VM_CACHE, default $XDG_CACHE_HOME/shift-vm); it is never installed on
// the host. Each run assembles an initramfs in Go (busybox-static, the module closure of
// rdma_rxe/ib_uverbs/dummy/crc32_generic, the iproute2 rdma tool and optional rdma-core tools
// with their shared libraries, and the test binaries), boots QEMU with TCG (KVM only where the
// host has real VT-x/SVM), and reads a line protocol the guest's /init writes to a second
// serial port, so kernel console messages never mix with test output.
//
// Tests call Run; it skips with the missing prerequisite named when QEMU, busybox-static, the
// rdma tool or the kernel package are unavailable, or when SHIFT_VM=0 or -short is set.
// SHIFT_VM=1 turns those skips into failures, for CI where the tier must run. Anything else
// that goes wrong (QEMU does not boot, rxe0 cannot be created, the guest times out) fails the
// test. QEMU never outlives the test that started it.
package vmtest
