// Package tooltest runs unmodified rdma-core and perftest programs (ibv_devinfo,
// ibv_rc_pingpong, ib_write_bw, ...) through libmlx5-shift on emulated ConnectX devices, for
// the plugin's tests: it builds the plugin and its preload object once per
// process, writes the emulated devices' sysfs tree and command-device stand-ins (package
// emusysfs), starts the programs with the environment that selects the plugin, optionally
// inside a network namespace; package toolrun parses what they print.
//
// Tests that use it skip, saying why, when a prerequisite is missing: root (the stand-ins
// live in /dev/infiniband), the programs (Debian's ibverbs-utils and perftest), or a C
// compiler for the plugin.
package tooltest
