// Package probe detects the loss and return of a NIC's link and feeds them to the failover
// layer as events, faster and more completely than waiting for the RDMA device's own port
// event. The kernel's link watch coalesces carrier changes (a physical NIC's carrier-down is
// delivered at most once a second host-wide, and short flaps merge into one netlink message),
// so one source is not enough: a Watcher combines
//
//   - the RTM_NEWLINK subscription (rtnetlink), the usual path;
//   - a periodic reconciliation that reads every watched link's state and its kernel
//     carrier counters (carrier_up_count/carrier_down_count, the numbers sysfs shows under
//     /sys/class/net/X), so that netlink messages the kernel dropped or merged are recovered
//     and every flap is reported;
//   - an eBPF hook where the kernel allows it: fexit on netif_carrier_off/netif_carrier_on
//     filtered on the watched interface indexes, or, where trampolines are refused (EPERM),
//     the workqueue_queue_work BTF tracepoint filtered on the link-watch work function, which
//     fires when a carrier flips but does not name the device. Either only wakes the
//     reconciliation of the affected links at once: events always carry the state read from
//     the kernel, never a guess.
//
// A Watcher owns one rtnetlink subscription, one query socket and, when eBPF is available,
// its programs, links and ring buffer; Close releases all of them and stops its goroutines.
package probe
