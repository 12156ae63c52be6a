package probe

import (
	"errors"
	"fmt"
	"time"
)

// Source names the mechanism that first observed a link change.
type Source string

const (
	// SourceNetlink: an RTM_NEWLINK message of the rtnetlink subscription.
	SourceNetlink Source = "netlink"
	// SourceDump: the periodic full link dump (a change netlink did not deliver).
	SourceDump Source = "netlink-dump"
	// SourceCarrierCount: the periodic read of a watched link's carrier counters (flaps the
	// netlink messages merged).
	SourceCarrierCount Source = "carrier-count"
	// SourceFexit: the eBPF fexit programs on netif_carrier_off/netif_carrier_on.
	SourceFexit Source = "ebpf-fexit"
	// SourceTracepoint: the eBPF program on the workqueue_queue_work BTF tracepoint,
	// filtered on the link-watch work.
	SourceTracepoint Source = "ebpf-tracepoint"
)

// LinkEvent is one transition of a watched link. A link is Up when it is administratively
// up and its operational state is up (carrier present). Flaps that happened between two
// observations are reported as the down/up pairs the kernel's counters show, in order.
type LinkEvent struct {
	Netdev  string
	Ifindex int
	Up      bool
	Source  Source
	// Time is when the watcher observed the transition (the read that found it).
	Time time.Time
	// DownCount and UpCount are the kernel's carrier counters read with the transition (0
	// when the kernel does not report them).
	DownCount, UpCount uint32
}

// Watcher reports link events of the watched netdevs.
type Watcher interface {
	// Events is closed by Close. A slow reader delays the watcher; events are never dropped.
	Events() <-chan LinkEvent
	// Sources lists the sources that are running, the eBPF one first when there is one.
	Sources() []Source
	// EBPFError says why the preferred eBPF source does not run: with EBPFAuto, why fexit
	// was refused (even when the tracepoint runs in its place) or why neither loaded; nil
	// when the first choice runs or eBPF is off.
	EBPFError() error
	// Close stops the watcher and releases its sockets, programs and goroutines.
	Close() error
}

// EBPFMode selects the eBPF source.
type EBPFMode int

const (
	// EBPFAuto tries fexit, then the tracepoint, then runs without eBPF.
	EBPFAuto EBPFMode = iota
	// EBPFOff runs the netlink sources only.
	EBPFOff
	// EBPFFexit requires the fexit programs (New fails without them).
	EBPFFexit
	// EBPFTracepoint requires the tracepoint program (New fails without it).
	EBPFTracepoint
)

// Options configure a Watcher.
type Options struct {
	// Netdevs are the names of the links to watch; at least one.
	Netdevs []string
	// NetNS is the path of the network namespace the links live in (such as
	// /var/run/netns/NAME); empty means the caller's.
	NetNS string
	// PollInterval is the period of the carrier-counter read; 0 means 100 ms, negative
	// disables it.
	PollInterval time.Duration
	// DumpInterval is the period of the full link dump; 0 means 1 s, negative disables it.
	DumpInterval time.Duration
	// NoNetlink turns the RTM_NEWLINK subscription off (to measure the other sources
	// alone); it runs by default.
	NoNetlink bool
	// EBPF selects the eBPF source.
	EBPF EBPFMode
	// Buffer is the capacity of the events channel; 0 means 256.
	Buffer int
}

var (
	// ErrNoLink: a watched netdev does not exist.
	ErrNoLink = errors.New("probe: no such link")
	// ErrClosed: the watcher is closed.
	ErrClosed = errors.New("probe: watcher closed")
)

func (o *Options) defaults() error {
	if len(o.Netdevs) == 0 {
		return fmt.Errorf("probe: new watcher: no netdev to watch")
	}
	if o.PollInterval == 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.DumpInterval == 0 {
		o.DumpInterval = time.Second
	}
	if o.Buffer <= 0 {
		o.Buffer = 256
	}
	return nil
}
