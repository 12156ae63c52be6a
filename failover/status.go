package failover

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Status publishing (issue 13): every context writes what it is doing into a status file of
// the user's runtime directory, for shiftctl status and shiftctl metrics to read without
// stopping the process. This file holds the format and the per-QP counters; status_pub.go
// the publisher, status_read.go the reader. docs/OPERATIONS.md describes the format.

// StatusVersion is the version of the status file format (ProcessStatus.Version). Readers
// skip files of another version.
const StatusVersion = 1

// ProcessStatus is the content of one status file: one failover context of one process.
type ProcessStatus struct {
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	Start   uint64 `json:"start"`   // the process's start time, clock ticks since boot
	Command string `json:"command"` // the process's name (/proc/<pid>/comm)
	Seq     uint64 `json:"seq"`     // the context's number in the process
	Device  string `json:"device"`  // the default device
	// Backups is the backup chain: the backup devices in order, the one in use first.
	Backups []string `json:"backups"`
	Port    uint8    `json:"port"`
	Job     string   `json:"job"`
	// KV is the attribute store in use: "mem", "dir:PATH", "redis://host:port/db" (without
	// the password), or the store's Go type.
	KV string `json:"kv"`
	// LinkWatch is the source of the default NIC's link events: "none", "events" (a
	// channel the application gave in Options.LinkEvents), or the running sources of the
	// link watcher joined by "," (probe.Source: "ebpf-fexit,netlink", "netlink", ...).
	LinkWatch   string `json:"link_watch"`
	ControlFile string `json:"control_file,omitempty"`
	// IntervalSeconds is the publishing interval: a file whose Updated is much older than
	// that belongs to a process that no longer runs its publisher (stopped, for instance).
	IntervalSeconds float64    `json:"interval_seconds"`
	Updated         time.Time  `json:"updated"`
	Counters        Counters   `json:"counters"`
	QPs             []QPStatus `json:"qps"`
}

// Counters are the context-wide counters of a status file (Stats, for the JSON form).
type Counters struct {
	Fallbacks      uint64 `json:"fallbacks"`
	Refused        uint64 `json:"refused"`
	Reposted       uint64 `json:"reposted"`
	Skipped        uint64 `json:"skipped"`
	Transitions    uint64 `json:"transitions"`
	Probes         uint64 `json:"probes"`
	ProbeFailures  uint64 `json:"probe_failures"`
	Recoveries     uint64 `json:"recoveries"`
	RecvRecoveries uint64 `json:"recv_recoveries"`
	LinkEvents     uint64 `json:"link_events"`
	LinkFallbacks  uint64 `json:"link_fallbacks"`
	LinkUpProbes   uint64 `json:"link_up_probes"` // probes brought forward by an up event
	// AppErrors: QPs failed by the application's own error (reported, never failed over);
	// Chains: moves from a failed backup to the next; AsyncEvents, EventFallbacks,
	// WatchdogFallbacks: the default device's async events read, the fallbacks they started,
	// and those the completion watchdog started; WatchdogBackups: backup devices the
	// watchdog took for hung.
	AppErrors         uint64 `json:"app_errors"`
	AppStops          uint64 `json:"app_stops"` // QPs the application moved to ERR (or reset)
	Chains            uint64 `json:"chains"`
	AsyncEvents       uint64 `json:"async_events"`
	EventFallbacks    uint64 `json:"event_fallbacks"`
	WatchdogFallbacks uint64 `json:"watchdog_fallbacks"`
	WatchdogBackups   uint64 `json:"watchdog_backups"`
	// Inboxed: posts that found their QP held by a transition and were left to the engine.
	Inboxed uint64 `json:"inboxed"`
	// Rearms, CtlRearms: backup QP sets and control QP pairs rebuilt after their device's
	// link came back.
	Rearms     uint64  `json:"rearms"`
	CtlRearms  uint64  `json:"ctl_rearms"`
	SwitchBack float64 `json:"switch_back_seconds"` // sum over the recoveries
	Stall      float64 `json:"stall_seconds"`       // sum over the recoveries
}

// QPStatus is one QP of a status file.
type QPStatus struct {
	QPN       uint32 `json:"qpn"` // the default QP's number
	SendState string `json:"send_state"`
	RecvState string `json:"recv_state"`
	// Round is its part in a reset round (RoundState), Pin who switched it to the backup on
	// purpose (PinState).
	Round string `json:"round"`
	Pin   string `json:"pin"`
	// NIC is the device the QP's send side uses: the default device in Default, the backup
	// from the fallback until the recovery completes, "" when the QP failed.
	NIC         string   `json:"nic"`
	RecvNIC     string   `json:"recv_nic"` // the same for the receive side
	BackupChain []string `json:"backup_chain"`
	BackupQPN   uint32   `json:"backup_qpn,omitempty"` // 0 until the shadow goroutine created it
	BackupReady bool     `json:"backup_ready"`         // connected to the peer's backup QP
	Fallbacks   uint64   `json:"fallbacks"`            // fallbacks completed
	Recoveries  uint64   `json:"recoveries"`           // send side back to Default
	Reposted    uint64   `json:"reposted"`             // send WRs reposted on the backup
	Refused     uint64   `json:"refused"`              // fallbacks refused (the QP failed)
	Probes      uint64   `json:"probes"`               // probes of the default path posted
	// TimeOnBackup is the time the send side spent off the default NIC (from the failure
	// to the end of the recovery), the current stay included.
	TimeOnBackup  float64   `json:"time_on_backup_seconds"`
	LastEvent     string    `json:"last_event,omitempty"` // the last Event of its state machine
	LastEventTime time.Time `json:"last_event_time,omitzero"`
}

// qpCounters are a QP's own counters, each incremented next to the context-wide one.
type qpCounters struct {
	fallbacks, recoveries, reposted, refused, probes, chains atomic.Uint64
}

// eventTrack follows a QP's state machine for the status file: the last event and its time,
// and the time on the backup. It is written with the QP's mutex held (by the machine's
// transitions) and read without it.
type eventTrack struct {
	last     atomic.Uint32 // Event+1 (0: none yet)
	lastNS   atomic.Int64  // unix ns of the last event
	offNS    atomic.Int64  // unix ns the send side left the default NIC (0: not off it)
	backupNS atomic.Int64  // time off the default NIC, stays that ended
	// kick wakes the status publisher (nil: none); set before the QP is reachable.
	kick chan struct{}
}

// onBackup reports whether a QP whose send side is in s runs on the backup NIC.
func onBackup(s SendState) bool { return s != SendDefault && s != SendFailed }

// event records ev; from and to are the send side's states before and after it (equal for
// an event of the receive side).
func (t *eventTrack) event(ev Event, from, to SendState) {
	now := time.Now().UnixNano()
	t.last.Store(uint32(ev) + 1)
	t.lastNS.Store(now)
	switch {
	case !onBackup(from) && onBackup(to):
		t.offNS.Store(now)
	case onBackup(from) && !onBackup(to):
		if off := t.offNS.Load(); off != 0 {
			t.backupNS.Add(now - off) // before offNS is cleared: see timeOnBackup
		}
		t.offNS.Store(0)
	}
	t.wake()
}

// wake asks the status publisher for a publication soon (a QP was created, destroyed or
// moved), without waiting.
func (t *eventTrack) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// timeOnBackup is the time spent on the backup until now. It never goes back: a stay that
// ends while it reads is read again.
func (t *eventTrack) timeOnBackup(now int64) time.Duration {
	for {
		off := t.offNS.Load()
		b := t.backupNS.Load()
		if t.offNS.Load() != off {
			continue
		}
		if off != 0 && now > off {
			b += now - off
		}
		return time.Duration(b)
	}
}

// status is q's entry of the status file; it reads atomics only.
func (q *QP) status(now time.Time, chain []string) QPStatus {
	c := q.c
	ss, rs := q.SendState(), q.RecvState()
	// The QP's own chain: the backup in use first, those it left behind dropped.
	if i := int(q.cur.Load()); i < len(chain) {
		chain = chain[i:]
	}
	s := QPStatus{QPN: q.qpn, SendState: ss.String(), RecvState: rs.String(), BackupChain: chain,
		Round: q.mach.roundState().String(), Pin: q.mach.pinState().String(),
		BackupReady: q.cs().ready.Load(),
		Fallbacks:   q.stats.fallbacks.Load(), Recoveries: q.stats.recoveries.Load(),
		Reposted: q.stats.reposted.Load(), Refused: q.stats.refused.Load(), Probes: q.stats.probes.Load(),
		TimeOnBackup: q.mach.track.timeOnBackup(now.UnixNano()).Seconds()}
	bk := ""
	if len(chain) > 0 {
		bk = chain[0]
	}
	switch {
	case ss == SendDefault:
		s.NIC = c.def.Name()
	case onBackup(ss):
		s.NIC = bk
	}
	switch rs {
	case RecvDefault:
		s.RecvNIC = c.def.Name()
	case RecvFallback:
		s.RecvNIC = bk
	}
	if b := q.cs().qp.Load(); b != nil {
		s.BackupQPN = b.QPN()
	}
	if ev := q.mach.track.last.Load(); ev != 0 {
		s.LastEvent = Event(ev - 1).String()
		s.LastEventTime = time.Unix(0, q.mach.track.lastNS.Load())
	}
	return s
}

// Status is the context's status as its status file holds it, taken now: it reads atomics
// and the list of live QPs, never a lock of the data path.
func (c *Context) Status() ProcessStatus {
	now := time.Now()
	st := c.Stats()
	s := ProcessStatus{Version: StatusVersion, PID: c.pid, Start: c.start, Command: procComm(), Seq: c.seq,
		Device: c.def.Name(), Backups: slices.Clone(c.backups), Port: c.opts.Port, Job: c.opts.Job,
		KV: describeKV(c.opts.KV), LinkWatch: c.linkSource(), ControlFile: c.ControlFile(),
		Updated: now,
		Counters: Counters{Fallbacks: st.Fallbacks, Refused: st.Refused, Reposted: st.Reposted, Skipped: st.Skipped,
			Transitions: st.Transitions, Probes: st.Probes, ProbeFailures: st.ProbeFailures,
			Recoveries: st.Recoveries, RecvRecoveries: st.RecvRecoveries,
			LinkEvents: st.LinkEvents, LinkFallbacks: st.LinkFallbacks, LinkUpProbes: st.LinkUpProbes,
			AppErrors: st.AppErrors, AppStops: st.AppStops, Chains: st.Chains, AsyncEvents: st.AsyncEvents,
			EventFallbacks: st.EventFallbacks, WatchdogFallbacks: st.WatchdogFallbacks,
			WatchdogBackups: st.WatchdogBackups, Inboxed: st.Inboxed,
			Rearms: st.Rearms, CtlRearms: st.CtlRearms,
			SwitchBack: st.SwitchBack.Seconds(), Stall: st.Stall.Seconds()}}
	if c.pub != nil {
		s.IntervalSeconds = c.pub.interval.Seconds()
	}
	qs := c.live.all()
	slices.SortFunc(qs, func(a, b *QP) int { return int(a.qpn) - int(b.qpn) })
	s.QPs = make([]QPStatus, 0, len(qs))
	for _, q := range qs {
		s.QPs = append(s.QPs, q.status(now, s.Backups))
	}
	return s
}

// LinkWatch names where the context's link events come from: the link watcher's running
// sources ("ebpf-fexit,netlink", with why eBPF does not run when it does not), "events"
// (Options.LinkEvents), or "none: " and why there is no watcher.
func (c *Context) LinkWatch() string { return c.linkSource() }

// linkSource is LinkWatch (ProcessStatus.LinkWatch).
func (c *Context) linkSource() string {
	switch {
	case c.linkWatcher != nil:
		var names []string
		for _, s := range c.linkWatcher.Sources() {
			names = append(names, string(s))
		}
		src := strings.Join(names, ",")
		if err := c.linkWatcher.EBPFError(); err != nil {
			src += " (eBPF: " + err.Error() + ")"
		}
		return src
	case c.opts.LinkEvents != nil:
		return "events"
	case c.linkWhy != "":
		return "none: " + c.linkWhy
	}
	return "none"
}

// describeKV names a store for the status file: its String method (the stores of package kv
// have one, without credentials), else its Go type.
func describeKV(s any) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprintf("%T", s)
}
