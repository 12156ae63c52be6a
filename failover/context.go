package failover

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/probe"
	"github.com/shift-rdma/shift/provider/verbs"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider"
)

// Options configure a failover Context. The library reads no environment variable: SHIFT's
// edges (the libibverbs plugin, shiftctl, the demo) read SHIFT_BACKUP, SHIFT_KV, SHIFT_JOB,
// SHIFT_INJECT, SHIFT_INJECT_SHM, XDG_RUNTIME_DIR and the rest once, into these fields
// (package internal/shiftenv; README "Environment variables").
type Options struct {
	// Backups names the backup devices explicitly, in the order they are used; empty means
	// automatic selection (every other device with an active port and a RoCEv2 GID; the
	// edges set it from SHIFT_BACKUP). Every backup carries shadows of every object
	// (replayed in the background); a QP falls back to the first, and moves to the next one
	// when the backup in use fails too (docs/FAILOVER.md "N backups"). The peer must have
	// as many backups: backup i of one host connects to backup i of the other.
	Backups []string
	// KV is the attribute store shared by every host of the job; nil means the store KVAddr
	// names, opened by OpenContext and closed with the Context.
	KV kv.Store
	// KVAddr names the store to open when KV is nil, as kv.OpenURL takes it
	// (redis://[user:pass@]host:port/db, rediss://..., dir:PATH); empty means the embedded
	// default for processes on one host, a directory store in RunDir/kv (kv.OpenDefault).
	// The edges set it from SHIFT_KV.
	KVAddr string
	// Job namespaces the KV keys (shift/<Job>/...); empty means "default" (the edges set it
	// from SHIFT_JOB).
	Job string
	// Port and GIDIndex select the GID that names this host's default and backup devices in
	// the KV keys and that the backup QPs use (0: port 1, index 0). A negative GIDIndex picks
	// each device's preferred GID (verbs.PreferredGID: the RoCE v2 GID of an IPv4 address,
	// as perftest and NCCL pick theirs; on a ConnectX index 0 is a RoCE v1 link-local GID).
	Port     uint8
	GIDIndex int
	// KVTimeout bounds one KV operation on the fallback path (0: 2 s).
	KVTimeout time.Duration
	// DrainTimeout bounds the wait for a failed default QP's last completions (0: 10 s).
	DrainTimeout time.Duration
	// InjectFile is the shared-memory injection file to map; empty means the process's
	// control file in RunDir when ControlFile is set, else none (see inject.go). A file that
	// cannot be opened safely is not used (Context.ControlErr).
	InjectFile string
	// ControlFile maps the process's control file (ctl-<pid>-<start time> in RunDir, shared
	// by the process's contexts) so that shiftctl inject and shiftctl switch reach the
	// context from another process of the same user. The edges set it from
	// SHIFT_INJECT_SHM=1.
	ControlFile bool
	// Inject arms a failure injection when the context opens (InjectSpec; zero: none), as
	// Context.Inject does. The edges set it from SHIFT_INJECT (ParseInject).
	Inject InjectSpec
	// RunDir is the user's runtime directory (package rundir): the embedded default KV store
	// (kv/), the control file and, without StatusDir, the status file live there. It must be
	// private to the user (0700, checked on every use). Empty means /dev/shm/shift-<uid>
	// (rundir.Default); the edges set $XDG_RUNTIME_DIR/shift where XDG_RUNTIME_DIR is set.
	RunDir string
	// Provider configures the provider contexts the failover context opens: the default
	// device's in Open (OpenContext takes one already open) and every backup's. The edges
	// set it from MLX5_TOTAL_UUARS and MLX5_NUM_LOW_LAT_UUARS.
	Provider provider.Options
	// HandshakeTimeout bounds the wait for the peer's receive counter (0: 10 s); past it the
	// QP fails and the application gets the errors.
	HandshakeTimeout time.Duration
	// ProbeInterval is the first wait between probes of a fallen-back QP's default path
	// (0: 100 ms; the plugin reads $SHIFT_PROBE_INTERVAL); it doubles after each failed probe up to
	// ProbeMaxInterval (0: 2 s) and starts over after a recovery.
	ProbeInterval, ProbeMaxInterval time.Duration
	// FenceAfter bounds how long, and FenceAfterWRs how many WRs, a QP in WaitSignaled waits
	// for the application's next signaled WR before SHIFT posts its own signaled zero-length
	// WRITE as the fence (0: 64 WRs and 10 ms; the plugin reads $SHIFT_FENCE_AFTER as "<n>,<duration>").
	FenceAfter    time.Duration
	FenceAfterWRs int
	// LinkEvents, when set, carries the default NIC's link events (a probe.Watcher's
	// Events() on the default netdev, or the emulator's fabric): a down event moves every
	// QP with traffic on the default NIC to the backup at once (link.go). The context reads
	// it until it is closed or the context closes. With link events on, the default
	// device's own PORT_ERR for Port (read from its async fd) starts the same fallbacks.
	LinkEvents <-chan probe.LinkEvent
	// The link watcher (issue 12 §4): when LinkEvents is nil, Open starts a probe.Watcher
	// (eBPF where the kernel allows it, netlink otherwise) on the netdev of the default
	// device's port and uses its events, by default for a hardware device whose port has a
	// netdev; where it cannot start, the context runs without it and LinkWatch says why.
	// WatchLink requires it (Open fails when it cannot start; also for an emulated device,
	// whose netdev is a stand-in), NoLinkWatch turns it off. LinkNetNS is the network
	// namespace the netdev lives in ("" the caller's).
	WatchLink   bool
	NoLinkWatch bool
	LinkNetNS   string
	// StatusInterval is how often the context rewrites its status file (status.go, read by
	// shiftctl status and metrics; it is also rewritten shortly after each state transition):
	// 0 means DefaultStatusInterval (1 s), a negative value no status file. StatusDir is the
	// directory of the file ("": RunDir); it must be private to the user. A file that cannot
	// be written leaves the context without one (Context.StatusErr).
	StatusInterval time.Duration
	StatusDir      string
	// CQWatchdog bounds how long a QP on the default NIC may have signaled WRs outstanding
	// without a completion while its port is up before SHIFT takes the NIC for hung and
	// falls back (watchdog.go): 0 means DefaultCQWatchdog, a negative value no watchdog.
	// The plugin sets it from $SHIFT_CQ_WATCHDOG.
	CQWatchdog time.Duration
	// Clock is the time source of the layer's deadlines, handshake timers and timestamps,
	// and of every timer of a stepped context (probes, shadow back-offs); nil means the wall
	// clock. A deterministic simulation gives a manual one (clock.Manual). A context with
	// goroutines paces them (probes, watchdog, back-offs, status file) on the wall clock.
	Clock clock.Clock
	// Stepped runs the context with no goroutine of its own, for a deterministic simulation
	// (internal/sim): the caller runs its background work with Step (the engine's queued
	// transitions, the backup devices' completions and shadow verbs), a wait for a NIC's
	// completions calls Yield instead of sleeping, the probes of a fallen-back QP's default
	// path are Clock timers that queue their steps on the engine, so is the completion
	// watchdog's scan, Step reads the default device's async events without blocking, and
	// the link watcher, the backups' port events and the status and control files do not
	// run. Use it with a manual Clock.
	Stepped bool
	// Yield, with Stepped, lets the world move while SHIFT waits for a NIC: the simulator
	// runs its other steps (the NICs, the fabric, the clock) and returns; nil returns at
	// once.
	Yield func()
	// DropControl, for a simulation's faults, is asked about every round notification or
	// reply and every neverSent message or request (not refusals) that arrives on a control
	// QP: true drops it, as a message for a QP whose backup set is not connected to the
	// sender's is dropped (notifyresend.go, recvonly.go).
	DropControl func() bool
}

// Stats are context-wide counters.
type Stats struct {
	Fallbacks uint64 // QPs that completed a fallback
	Refused   uint64 // fallbacks refused (unsafe WR, KV, backup not ready)
	// AppErrors counts QPs whose default QP failed by the application's own error (a bad
	// key, address, length or opcode, on either side): reported as is, never failed over.
	AppErrors uint64
	// AppStops counts QPs the application moved to ERR, or to RESET once connected: SHIFT
	// stopped with them, as with an application error (appstop.go).
	AppStops    uint64
	Transitions uint64 // state transitions of every QP
	Reposted    uint64 // send WRs reposted on backup QPs
	Skipped     uint64 // send WRs treated as completed because the peer had received them
	// Recovery (issue 6).
	Probes         uint64 // probes posted on a fallen-back default path
	ProbeFailures  uint64 // probes that did not complete successfully (path reset, retried)
	Recoveries     uint64 // send sides back to Default through the fence
	RecvRecoveries uint64 // receive sides back to Default on the peer's notification
	// RecvLateWaits counts the receive recoveries that found fewer messages received than
	// the peer's notification counted, and polled the backup CQ until the rest came
	// (recvcount.go); RecvLateTimeouts those that gave up after the bound.
	RecvLateWaits, RecvLateTimeouts uint64
	ShiftFences                     uint64 // fences SHIFT posted itself (no signaled application WR in time)
	Fillers                         uint64 // zero-length SENDs posted to consume the peer's stale backup receives
	FastReopens                     uint64 // QPs put back on the lock-free data path after a recovery
	// LinkEvents counts the link events read from Options.LinkEvents; LinkFallbacks the
	// fallbacks a down event started; LinkUpProbes the probes an up event brought forward:
	// a waiting probe step run sooner, or a probe sent into the down link given up for a new
	// one (probe_up.go).
	LinkEvents, LinkFallbacks, LinkUpProbes uint64
	// Chains counts the moves of a QP from a backup that failed to the next backup.
	Chains uint64
	// AsyncEvents counts the default device's async events SHIFT read (and forwarded);
	// EventFallbacks the fallbacks they started (DEVICE_FATAL, PORT_ERR, QP_FATAL);
	// WatchdogFallbacks those the completion watchdog started on a silent NIC;
	// WatchdogBackups the backup devices it took for hung (their QPs chained on).
	AsyncEvents, EventFallbacks, WatchdogFallbacks, WatchdogBackups uint64
	// ResetRounds counts rounds in which only the default QPs were reset and nothing was
	// reposted (a failed probe or fence while our traffic ran on the backup).
	ResetRounds uint64
	// Inboxed counts the application's posts that found their QP's mutex held by a
	// transition and were left to the engine instead of waiting (inbox.go).
	Inboxed uint64
	// RefusalsResent counts refusals (of failed or destroyed QPs) sent again on another
	// control endpoint towards the same peer, the first lost with one that failed or was
	// replaced (resendRefusals).
	RefusalsResent uint64
	// NotificationsResent counts round notifications sent again because no reply came in
	// time: a handshake's once halfway through HandshakeTimeout, a reset round's every
	// HandshakeTimeout (notifyresend.go).
	NotificationsResent uint64
	// SwitchBack and Stall sum, over Recoveries, the time from probe success to Default and
	// the time application WRs were withheld (fence WR posted → Default).
	SwitchBack, Stall time.Duration
	// KVWaits counts the fallback rounds and backup posts that found a peer's MR entry
	// missing from the cache and read the store for it (a round with the QP's mutex
	// released, a post's WRs left in the inbox meanwhile: keywait.go); KVWait sums the time
	// the reads took (rkcache.go).
	KVWaits uint64
	KVWait  time.Duration
	// Rearms counts the backup QP sets rebuilt after their device's link came back, over
	// every backup device; CtlRearms the control QP pairs rebuilt (rearm.go).
	Rearms, CtlRearms uint64
}

// now is the context's clock's time (Options.Clock).
func (c *Context) now() time.Time { return c.clk.Now() }

// Context is a default device with its backup (struct ibv_context for the application).
type Context struct {
	clk   clock.Clock // Options.Clock, or the wall clock
	def   *provider.Context
	bks   []*backupDev // the backup chain, in Options.Backups order
	opts  Options
	ownKV kv.Store // the store OpenContext opened (Options.KV nil), closed with the Context
	gid   [16]byte // default GID (KV key of this host's default objects)
	// ctlID names this context to its peers' shared control QPs (ctlep.go): random, so that
	// two processes on one host are two peers.
	ctlID uint64

	// The injection words: the context's own, or those of the shared-memory file.
	injArmed *atomic.Int64 // WRs until the injected fault (0: off)
	injQPN   *atomic.Uint32
	injOwn   struct {
		armed atomic.Int64
		qpn   atomic.Uint32
	}
	injFile *injectShared
	ctlErr  error   // why the context has no control file though one was asked for
	live    liveQPs // QPs by default QPN, for the switch requests of the injection file

	cqIDs atomic.Uint64 // user handles of CQs created without one

	fallbacks, refused, transitions, reposted, skipped atomic.Uint64
	appErrors, appStops                                atomic.Uint64

	probes, probeFails, recoveries, recvRecoveries, shiftFences, fillers atomic.Uint64
	recvLateWaits, recvLateTimeouts                                      atomic.Uint64
	fastReopens, resetRounds, chains, inboxed                            atomic.Uint64
	refusalsResent, notifyResent                                         atomic.Uint64
	linkEvents, linkFallbacks                                            atomic.Uint64
	linkUpProbes                                                         atomic.Uint64
	lastDown                                                             atomic.Int64 // the last down event read (ns, the context's clock)
	asyncEvents, eventFallbacks, watchdogFallbacks, watchdogBackups      atomic.Uint64
	// defDead: the default device failed for good (DEVICE_FATAL, or the watchdog found it
	// silent): fallbacks do not wait for its completions, nothing probes it again.
	defDead atomic.Bool
	// dropCtl, when set and true for a message arriving on a control endpoint, drops it as
	// deliver drops one it cannot deliver: Options.DropControl's faults, or a test's.
	dropCtl atomic.Pointer[func(ep *ctlEndpoint, m ctlMsg) bool]
	// portEvents: link events are on (Options.LinkEvents, WatchLink): PORT_ERR of the
	// port in use falls back as a link-down event does.
	portEvents            atomic.Bool
	async                 *asyncFwd
	wdDone                chan struct{}          // closed when the watchdog goroutine returned (nil: none)
	wdArmed               bool                   // a stepped context's watchdog timer is pending (watchdog_step.go; engine only)
	stepEventsAt          time.Time              // the instant Step last read the async descriptors (step.go)
	stepLinkEvents        <-chan probe.LinkEvent // Options.LinkEvents, read by Step (link_step.go; nil once closed)
	linkWG                sync.WaitGroup
	linkWatcher           probe.Watcher
	linkWhy               string // why there is no link watcher (LinkWatch)
	switchBackNS, stallNS atomic.Int64
	// The cache of the peers' MR entries (rkcache.go): how often the shadow goroutines list
	// them again (ns), and the reads a round or a post had to make itself.
	mrRefresh atomic.Int64
	kvWaits   atomic.Uint64
	kvWaitNS  atomic.Int64
	quit      chan struct{}
	eng       *engine
	probeWG   sync.WaitGroup
	keyWG     sync.WaitGroup // the inbox's key readers (keywait.go)
	probeMu   sync.Mutex
	closing   bool // probeMu

	// Status file (status_pub.go).
	backups   []string // the backup chain, the one in use first
	pid       int
	seq       uint64
	start     uint64
	pub       *statusPublisher
	statusErr error
}

type rkeyKey struct {
	gid  [16]byte
	rkey uint32
}

// Open opens the default device name and its backups. With zero Options the backups are
// chosen automatically, the KV store is the embedded default in /dev/shm/shift-<uid>/kv,
// the job is "default", and the link watcher is on for hardware; no environment variable
// is read (the edges fill Options from them: package internal/shiftenv).
func Open(name string, opts Options) (*Context, error) {
	def, err := provider.OpenWith(name, opts.Provider)
	if err != nil {
		return nil, fmt.Errorf("failover: default device: %w", err) // the provider names it
	}
	c, err := OpenContext(def, opts)
	if err != nil {
		def.Close()
		return nil, err
	}
	return c, nil
}

// OpenContext is Open over a default context already open (a C provider opens it on the
// command file libibverbs opened). On success the failover Context owns def and closes it
// with itself; on error the caller closes def (a provider Context closes once).
func OpenContext(def *provider.Context, opts Options) (*Context, error) {
	if err := opts.Inject.check(); err != nil {
		return nil, err
	}
	name := def.Name()
	if opts.Job == "" {
		opts.Job = "default"
	}
	var ownKV kv.Store
	if opts.KV == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := kv.OpenDefault(ctx, opts.KVAddr, opts.Job, opts.RunDir)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("failover: open %s: KV store (KVAddr %q): %w", name, opts.KVAddr, err)
		}
		opts.KV, ownKV = s, s
	}
	c, err := openContext(def, opts)
	if err != nil {
		if ownKV != nil {
			ownKV.Close()
		}
		return nil, err
	}
	c.ownKV = ownKV
	return c, nil
}

func openContext(def *provider.Context, opts Options) (*Context, error) {
	initGates()
	name := def.Name()
	if opts.Port == 0 {
		opts.Port = 1
	}
	if opts.KVTimeout == 0 {
		opts.KVTimeout = 2 * time.Second
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.CQWatchdog == 0 {
		opts.CQWatchdog = DefaultCQWatchdog
	}
	if err := recoveryDefaults(&opts); err != nil {
		return nil, err
	}
	backups, err := chooseBackups(name, opts)
	if err != nil {
		return nil, err
	}
	ctlID, err := newCtlID()
	if err != nil {
		return nil, err
	}
	c := &Context{opts: opts, clk: opts.Clock, quit: make(chan struct{}), ctlID: ctlID, eng: newEngine()}
	if c.clk == nil {
		c.clk = clock.Real{}
	}
	c.mrRefresh.Store(int64(mrRefreshDefault))
	c.injArmed, c.injQPN = &c.injOwn.armed, &c.injOwn.qpn
	if d := opts.DropControl; d != nil {
		drop := func(_ *ctlEndpoint, m ctlMsg) bool { return !m.refused && d() }
		c.dropCtl.Store(&drop)
	}
	if opts.InjectFile != "" || opts.ControlFile {
		// A control file that cannot be had safely (another user's, a link, the runtime
		// directory not private) leaves the context without one: its traffic runs, and
		// ControlErr says why shiftctl cannot reach it.
		if c.injFile, c.ctlErr = mapInjectFile(opts.InjectFile, opts.RunDir); c.ctlErr == nil {
			c.injArmed, c.injQPN = c.injFile.words()
		}
	}
	c.def = def
	g, err := def.SourceGID(opts.Port, opts.GIDIndex)
	if err != nil {
		c.releaseInject()
		return nil, fmt.Errorf("failover: open %s: default GID: %w", name, err)
	}
	c.gid = g.GID
	for i, name := range backups {
		b, err := openBackup(c, i, name)
		if err != nil {
			for _, o := range c.bks {
				_ = o.close()
			}
			c.releaseInject()
			return nil, err
		}
		c.bks = append(c.bks, b)
	}
	if c.async, err = newAsyncFwd(c); err != nil {
		for _, o := range c.bks {
			_ = o.close()
		}
		c.releaseInject()
		return nil, err
	}
	if inj := opts.Inject; inj.N > 0 {
		c.Inject(inj.QPN, inj.N)
	}
	if opts.Stepped {
		// No watchers of the outside world (Options.Stepped): no link watcher, control or
		// status file; Step runs the engine, reads the async events and arms the watchdog.
		c.backups = backups
		c.eng.stepped = true
		if opts.LinkEvents != nil {
			c.portEvents.Store(true) // as with a watchLinks goroutine
			c.stepLinkEvents = opts.LinkEvents
		}
		return c, nil
	}
	c.joinControl() // fully open: switch requests may reach its QPs
	switch {
	case opts.LinkEvents != nil:
	case opts.NoLinkWatch:
		c.linkWhy = "off (NoLinkWatch)"
	default:
		w, err := watchDefaultLink(name, opts)
		var nw *noWatchError
		switch {
		case err != nil && opts.WatchLink:
			_ = c.Close()
			return nil, fmt.Errorf("failover: open %s: watch the link: %w", name, err)
		case errors.As(err, &nw):
			c.linkWhy = nw.why
		case err != nil:
			c.linkWhy = err.Error()
		default:
			c.linkWatcher = w
			opts.LinkEvents = w.Events()
		}
	}
	if opts.LinkEvents != nil {
		c.portEvents.Store(true)
		c.linkWG.Add(1)
		go c.watchLinks(opts.LinkEvents)
	}
	c.backups = backups
	c.startEngine()
	c.startWatchdog()
	c.startStatus(cmp.Or(opts.StatusDir, opts.RunDir), opts.StatusInterval)
	return c, nil
}

// Default is the default provider context (for tools and tests).
func (c *Context) Default() *provider.Context { return c.def }

// Backup is the first backup provider context.
func (c *Context) Backup() *provider.Context { return c.bks[0].ctx }

// Backups are the backup provider contexts, in the order they are used.
func (c *Context) Backups() []*provider.Context {
	out := make([]*provider.Context, len(c.bks))
	for i, b := range c.bks {
		out[i] = b.ctx
	}
	return out
}

// record appends a control verb to every backup device's shadow list; run gets the device.
func (c *Context) record(name string, run func(b *backupDev) error) []*shadowOp {
	ops := make([]*shadowOp, len(c.bks))
	for i, b := range c.bks {
		ops[i] = b.record(name, func() error { return run(b) })
	}
	return ops
}

// GIDByIndex is provider.Context.GIDByIndex on the default device.
func (c *Context) GIDByIndex(port uint8, idx int) (verbs.GID, error) {
	return c.def.GIDByIndex(port, idx)
}

// Name is the default device's name.
func (c *Context) Name() string { return c.def.Name() }

// QueryDevice is ibv_query_device on the default device.
func (c *Context) QueryDevice() (verbs.DeviceAttr, error) { return c.def.QueryDevice() }

// QueryPort is ibv_query_port on the default device.
func (c *Context) QueryPort(port uint8) (verbs.PortAttr, error) { return c.def.QueryPort(port) }

// GIDs is the default device's GID table.
func (c *Context) GIDs() ([]verbs.GID, error) { return c.def.GIDs() }

// Stats returns the context-wide counters.
func (c *Context) Stats() Stats {
	var sets, eps uint64
	for _, b := range c.bks {
		sets += b.rearm.nSets.Load()
		eps += b.rearm.nEps.Load()
	}
	return Stats{Rearms: sets, CtlRearms: eps, Fallbacks: c.fallbacks.Load(), Refused: c.refused.Load(), AppErrors: c.appErrors.Load(), AppStops: c.appStops.Load(), Transitions: c.transitions.Load(),
		Reposted: c.reposted.Load(), Skipped: c.skipped.Load(),
		Probes: c.probes.Load(), ProbeFailures: c.probeFails.Load(), Recoveries: c.recoveries.Load(),
		RecvRecoveries: c.recvRecoveries.Load(), RecvLateWaits: c.recvLateWaits.Load(), RecvLateTimeouts: c.recvLateTimeouts.Load(),
		ShiftFences: c.shiftFences.Load(), Fillers: c.fillers.Load(),
		FastReopens: c.fastReopens.Load(),
		ResetRounds: c.resetRounds.Load(), Chains: c.chains.Load(), Inboxed: c.inboxed.Load(),
		RefusalsResent: c.refusalsResent.Load(), NotificationsResent: c.notifyResent.Load(),
		LinkEvents: c.linkEvents.Load(), LinkFallbacks: c.linkFallbacks.Load(), LinkUpProbes: c.linkUpProbes.Load(),
		AsyncEvents: c.asyncEvents.Load(), EventFallbacks: c.eventFallbacks.Load(), WatchdogFallbacks: c.watchdogFallbacks.Load(),
		WatchdogBackups: c.watchdogBackups.Load(),
		SwitchBack:      time.Duration(c.switchBackNS.Load()), Stall: time.Duration(c.stallNS.Load()),
		KVWaits: c.kvWaits.Load(), KVWait: time.Duration(c.kvWaitNS.Load())}
}

// WaitShadow waits until every recorded control verb has been replayed on every backup
// device.
func (c *Context) WaitShadow(ctx context.Context) error {
	var errs []error
	for _, b := range c.bks {
		errs = append(errs, b.wait(ctx))
	}
	return errors.Join(errs...)
}

// Close stops the background goroutines and closes both devices; objects still alive are
// destroyed by the kernel.
func (c *Context) Close() error {
	c.leaveControl() // first: no switch request may run while the QPs are torn down
	var serr error
	if c.pub != nil {
		serr = c.pub.close() // before the fields it reads are torn down
	}
	var werr error
	if c.linkWatcher != nil {
		werr = c.linkWatcher.Close() // closes its events: watchLinks returns
		c.linkWatcher = nil
	}
	c.stopProbes()
	c.linkWG.Wait() // stopProbes closed quit
	if c.eng != nil && c.eng.stepped {
		c.eng.stop()
	} else if c.eng != nil {
		<-c.eng.done // quit is closed
	}
	if c.wdDone != nil {
		<-c.wdDone // quit is closed
	}
	c.async.close() // before the QPs and devices it acts on are torn down
	for _, b := range c.bks {
		b.stopLoops() // all of them first: one device's goroutine may use another's endpoint
	}
	// The inbox's key readers (keywait.go), each within one KV timeout: after every holder of
	// the engine stopped, so that no drain starts another, and before the devices whose cache
	// they fill close.
	c.keyWG.Wait()
	var errs []error
	for _, b := range c.bks {
		errs = append(errs, b.closeStopped())
	}
	err := errors.Join(errs...)
	var kerr error
	if c.ownKV != nil {
		kerr = c.ownKV.Close()
	}
	return errors.Join(serr, werr, err, c.def.Close(), c.releaseInject(), kerr)
}

func (c *Context) releaseInject() error {
	if c.injFile == nil {
		return nil
	}
	c.leaveControl()
	f := c.injFile
	c.injFile = nil
	c.injArmed, c.injQPN = &c.injOwn.armed, &c.injOwn.qpn
	return f.release()
}

// Inject arms the failure injection of paper §5.1(3): the n-th next WR posted on QP qpn (0:
// any QP) is posted to the default NIC with an invalid lkey, so it and its QP fail with a
// local protection error; SHIFT reposts the correct WR on the backup. n counts the WRs
// posted after Inject returns; 0 disarms. The contexts sharing the control file share the
// injection.
func (c *Context) Inject(qpn uint32, n int64) {
	c.injQPN.Store(qpn)
	c.injArmed.Store(n)
	c.armInjection()
	if c.injFile != nil {
		c.injFile.ctl.armAll()
	}
}

// keys of the KV store: those of the first backup, as before there were several.
func (c *Context) mrKey(gid [16]byte, rkey uint32) string { return c.mrKeyN(0, gid, rkey) }

func (c *Context) qpKey(gid [16]byte, qpn uint32) string { return c.qpKeyN(0, gid, qpn) }

// mrKeyN and qpKeyN are the keys of backup idx's entries (a suffix /b<idx> beyond the first).
func (c *Context) mrKeyN(idx int, gid [16]byte, rkey uint32) string {
	return fmt.Sprintf("shift/%s/mr/%s/%d%s", c.opts.Job, hex.EncodeToString(gid[:]), rkey, backupSuffix(idx))
}

func (c *Context) qpKeyN(idx int, gid [16]byte, qpn uint32) string {
	return fmt.Sprintf("shift/%s/qp/%s/%d%s", c.opts.Job, hex.EncodeToString(gid[:]), qpn, backupSuffix(idx))
}

func backupSuffix(idx int) string {
	if idx == 0 {
		return ""
	}
	return fmt.Sprintf("/b%d", idx)
}

func (c *Context) kvCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.opts.KVTimeout)
}

// backupRKey maps a remote default rkey of the peer whose default GID is gid to the peer's
// backup rkey on the first backup, from the cache of the peer's MR entries (rkcache.go; no
// I/O, fail closed on a miss): only for an access of n bytes at addr within the range the
// peer registered, so an entry cannot stretch a WR beyond the MR it was published for.
func (c *Context) backupRKey(gid [16]byte, rkey uint32, addr, n uint64) (uint32, error) {
	return c.bks[0].backupRKey(gid, rkey, addr, n)
}

// backupLKey maps a default lkey to the lkey of its MR on backup device b (a local table).
func (b *backupDev) backupLKey(lkey uint32) (uint32, bool) {
	v, ok := b.lkeys.Load(lkey)
	if !ok {
		return 0, false
	}
	return v.(uint32), true
}

// ControlErr is why the context runs without the control file it was asked to map
// (Options.InjectFile or Options.ControlFile): the runtime directory or the file is not
// private to this user, for instance. nil when it has one or none was asked for.
func (c *Context) ControlErr() error { return c.ctlErr }

// ControlFile is the path of the context's control file ("" without one): what
// shiftctl inject and switch write.
func (c *Context) ControlFile() string {
	if c.injFile == nil {
		return ""
	}
	return c.injFile.path
}
