// Package toolrun reads what unmodified rdma-core and perftest programs leave behind: the
// result lines they print (ibv_rc_pingpong, ib_*_bw, ib_*_lat), whether a program listens
// on a TCP port yet, and the byte counters of the interfaces in its network namespace, both
// from /proc/<pid>/net, which shows the program's own namespace. The plugin's tests
// (through internal/tooltest) and the demo use it.
package toolrun
