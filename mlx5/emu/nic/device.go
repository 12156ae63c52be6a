package nic

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// Config describes one emulated HCA.
type Config struct {
	// Name identifies the device in errors (e.g. "emlx5_0").
	Name string
	// Ports are the device's ports; port numbers start at 1 as in verbs.
	Ports []PortConfig
	// Clock drives the RC engines' timers; nil means clock.Real.
	Clock clock.Clock
	// OnPortState is called when a port goes ACTIVE (up) or DOWN, so the kernel side can raise
	// IBV_EVENT_PORT_ACTIVE / IBV_EVENT_PORT_ERR. It must not block.
	OnPortState func(port int, up bool)
	// OnFatal is called once when the device dies (Kill), before its ports go down, so the
	// kernel side can raise IBV_EVENT_DEVICE_FATAL. It must not block.
	OnFatal func()
	// NewTransport builds the RC engine of a QP; nil means rc.New. Tests may substitute one.
	NewTransport func(h rc.Host) rc.Transport
	// Stepped starts no doorbell watcher and leaves the device off the idle scanner: the
	// caller runs each pass with Step, as a deterministic simulation's scheduler does (with a
	// manual Clock and a stepped fabric, nothing of the device then runs on its own).
	Stepped bool
}

// PortConfig describes one port.
type PortConfig struct {
	// Link is the port's attachment to the fabric; its Addr is the port's RoCEv2 GID (as an
	// IPv4 or IPv6 address). The device installs itself as the link's receiver.
	Link roce.Link
	// MTU is the port's active MTU in bytes (256..4096); 0 means 4096.
	MTU int
}

// Device is one emulated ConnectX: its ports, UAR pages and doorbell watcher, memory keys,
// CQs and QPs. All methods are safe for concurrent use.
type Device struct {
	name  string
	clk   clock.Clock
	newTr func(h rc.Host) rc.Transport
	ports []*Port
	// health is a Health: whether the device still executes anything (fatal.go).
	health  atomic.Uint32
	onFatal func()
	stepped bool
	// late holds responder CQEs back (late.go).
	late lateCQEs

	mu      sync.Mutex // guards the maps and counters below
	uars    map[uint32]*UAR
	nextUAR uint32
	nextCQN uint32
	nextQPN uint32

	objMu sync.RWMutex // guards cqs and qps for lookups from the data path
	cqs   map[uint32]*CQ
	qps   map[uint32]*QP
	// cqsByUAR lists the CQs armed through each page (key nil: through any page).
	cqsByUAR   map[*UAR][]*CQ
	armScratch []*CQ // used by the watcher only

	mkeys mkeyTable

	uarList atomic.Pointer[[]*UAR]
	pollMu  sync.Mutex // held by the watcher while it reads UAR pages

	kickMu  sync.Mutex
	kicks   []*QP
	kickRun []*QP
	wake    chan struct{}
	// waker lets a doorbell written through package mlx5 end the parked watcher's wait
	// (watcher.go); registered for each UAR page.
	waker *mlx5.UARWaker

	errMu      sync.Mutex
	errQPs     []*QP
	errScratch []*QP // used by the watcher only
	errCount   atomic.Int32

	stop      chan struct{}
	watchDone chan struct{}
	closed    atomic.Bool
	stats     counters
	// rechecks lists the shared registers the watcher re-checks on every pass (watcher only).
	rechecks []regRef
}

// counters are the device's activity counters.
type counters struct {
	passes, sleeps, idleLooks    atomic.Uint64
	pokeWakes                    atomic.Uint64
	sqDoorbells, cqDoorbells     atomic.Uint64
	strayDoorbells, wqesExecuted atomic.Uint64
	cqesWritten, rxPackets       atomic.Uint64
	rxNoQP, sharedRechecks       atomic.Uint64
}

// Stats is a snapshot of the device's counters.
type Stats struct {
	Passes         uint64 // doorbell polling passes (the watcher's, and the idle scanner's empty looks)
	IdleLooks      uint64 // of the passes, the idle scanner's empty looks at the parked device
	Sleeps         uint64 // times the watcher went idle (parked with the idle scanner)
	PokeWakes      uint64 // of those parks, the ones a doorbell's poke ended (mlx5.UARWaker)
	SQDoorbells    uint64 // send doorbells consumed
	CQDoorbells    uint64 // CQ arm doorbells consumed
	StrayDoorbells uint64 // send doorbells naming a QP that does not own the register
	WQEsExecuted   uint64 // send WQEs taken from send queues (including flushed ones)
	CQEsWritten    uint64
	RxPackets      uint64 // packets received on all ports
	RxNoQP         uint64 // received packets for an unknown QPN (dropped)
	// SharedRechecks counts the times the watcher re-checked every QP of a shared register
	// against its doorbell record (after a doorbell there, and while one had work).
	SharedRechecks uint64
	// PokeYield is the time writers of doorbells spent yielding to the woken watcher
	// (mlx5.UARWaker.Yielded): the device's work run on their processors, which a real NIC
	// does not cost them.
	PokeYield time.Duration
}

// New creates a device and starts its doorbell watcher. Close releases it.
func New(cfg Config) (*Device, error) {
	const op = "new device"
	if len(cfg.Ports) == 0 {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "%s: no ports", cfg.Name)
	}
	d := &Device{
		name:      cfg.Name,
		clk:       cfg.Clock,
		newTr:     cfg.NewTransport,
		onFatal:   cfg.OnFatal,
		stepped:   cfg.Stepped,
		uars:      make(map[uint32]*UAR),
		cqs:       make(map[uint32]*CQ),
		cqsByUAR:  make(map[*UAR][]*CQ),
		qps:       make(map[uint32]*QP),
		nextQPN:   firstQPN - 1,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		watchDone: make(chan struct{}),
	}
	d.waker = mlx5.NewUARWaker(d.wake)
	if d.clk == nil {
		d.clk = clock.Real{}
	}
	if d.newTr == nil {
		d.newTr = func(h rc.Host) rc.Transport { return rc.New(h) }
	}
	d.mkeys.init()
	for i, pc := range cfg.Ports {
		if pc.Link == nil {
			return nil, newErr(op, ErrInvalid, unix.EINVAL, "%s: port %d has no link", cfg.Name, i+1)
		}
		mtu := pc.MTU
		if mtu == 0 {
			mtu = 4096
		}
		if !validMTU(mtu) {
			return nil, newErr(op, ErrInvalid, unix.EINVAL, "%s: port %d mtu %d", cfg.Name, i+1, mtu)
		}
		d.ports = append(d.ports, &Port{num: i + 1, dev: d, link: pc.Link, mtu: mtu, notify: cfg.OnPortState})
	}
	for _, p := range d.ports {
		p.attach()
	}
	if d.stepped {
		close(d.watchDone)
		return d, nil
	}
	idle.attach()
	go d.watch()
	return d, nil
}

// firstQPN is the first QP number handed out; small numbers are special in IB (QP0, QP1).
const firstQPN = 0x100

func validMTU(m int) bool { return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096 }

// Name returns the device's name.
func (d *Device) Name() string { return d.name }

// Ports returns the number of ports.
func (d *Device) Ports() int { return len(d.ports) }

// Port returns port n (1-based) or nil.
func (d *Device) Port(n int) *Port {
	if n < 1 || n > len(d.ports) {
		return nil
	}
	return d.ports[n-1]
}

// Stats returns a snapshot of the device's counters.
func (d *Device) Stats() Stats {
	s := &d.stats
	return Stats{
		Passes: s.passes.Load(), IdleLooks: s.idleLooks.Load(), Sleeps: s.sleeps.Load(), PokeWakes: s.pokeWakes.Load(),
		SQDoorbells: s.sqDoorbells.Load(), CQDoorbells: s.cqDoorbells.Load(),
		StrayDoorbells: s.strayDoorbells.Load(), WQEsExecuted: s.wqesExecuted.Load(),
		CQEsWritten: s.cqesWritten.Load(), RxPackets: s.rxPackets.Load(), RxNoQP: s.rxNoQP.Load(),
		SharedRechecks: s.sharedRechecks.Load(), PokeYield: d.waker.Yielded(),
	}
}

// receive demultiplexes a packet arriving on a port by its destination QPN, as the NIC's
// receive pipeline does, and hands it to that QP's RC engine.
func (d *Device) receive(p *roce.Packet) {
	if !d.alive() {
		return // a hung or dead device's receive pipeline takes nothing
	}
	d.stats.rxPackets.Add(1)
	d.objMu.RLock()
	q := d.qps[p.BTH.DestQP&0xffffff]
	d.objMu.RUnlock()
	if q == nil {
		d.stats.rxNoQP.Add(1)
		return
	}
	q.handlePacket(p)
}

// Close destroys every QP and CQ, stops the watcher, detaches the ports and unmaps every UAR
// page. Memory software registered stays its own.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.objMu.Lock()
	qps := make([]*QP, 0, len(d.qps))
	for _, q := range d.qps {
		qps = append(qps, q)
	}
	d.objMu.Unlock()
	for _, q := range qps {
		_ = q.Destroy()
	}
	close(d.stop)
	<-d.watchDone
	if !d.stepped {
		idle.detach()
	}
	for _, p := range d.ports {
		p.detach()
	}
	d.objMu.Lock()
	clear(d.cqs)
	clear(d.cqsByUAR)
	d.objMu.Unlock()
	d.mu.Lock()
	uars := make([]*UAR, 0, len(d.uars))
	for _, u := range d.uars {
		uars = append(uars, u)
	}
	clear(d.uars)
	d.publishUARs()
	d.mu.Unlock()
	var first error
	for _, u := range uars {
		for i := range u.bf {
			u.bf[i].Store(nil)
		}
		if err := u.release(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// QP returns the QP with number qpn, or nil.
func (d *Device) QP(qpn uint32) *QP {
	d.objMu.RLock()
	defer d.objMu.RUnlock()
	return d.qps[qpn&0xffffff]
}

// CQ returns the CQ with number cqn, or nil.
func (d *Device) CQ(cqn uint32) *CQ {
	d.objMu.RLock()
	defer d.objMu.RUnlock()
	return d.cqs[cqn&0xffffff]
}
