package sim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Config is one simulation run.
type Config struct {
	Seed uint64
	// QPs is the number of QP pairs (all of a host's QPs share its CQ); 0 means 1 to 3,
	// drawn from the seed.
	QPs int
	// Ops is the number of application posts before the run drains; 0 means 300.
	Ops int
	// MaxSteps bounds the whole run; 0 means 200,000 (500,000 with Failover).
	MaxSteps int
	// Failover runs the application over the failover layer (failover.Options.Stepped):
	// each host has a default and a backup NIC, and a link down on a default NIC longer
	// than the RC reach must cost the application nothing. Without it, over the provider.
	Failover bool
	// Recovery (with Failover) probes the default paths every few ms of virtual time and
	// runs until every QP is back on its default NIC; without it a QP that fell back stays
	// on its backup for the rest of the run.
	Recovery bool
	// Backups (with Failover) is the number of backup NICs per host; 0 means 1. With more
	// than one, the links of every NIC but the last backup may go down past the RC reach,
	// so that QPs chain from one backup to the next.
	Backups int
	// CtlDrop (with Failover) drops the CtlDrop-th round notification or reply that arrives
	// on a control QP (either host, 1-based; 0: none), as a peer drops one for a QP whose set
	// is not connected to the sender's (ctldrop.go).
	CtlDrop int
	// Shapes (with Failover) draws the application's shapes from the seed: restricted remote
	// access (access.go) and deep receive queues (deep.go). TestFailoverSeeds and the scans
	// set it; the seeds the tests pinned before the shapes existed run without them, as
	// they did when they were found.
	Shapes bool
}

// Result is what a run did.
type Result struct {
	Seed                   uint64
	Steps, Posts, WCs      int
	Errors                 int // error completions (a link down past the RC retry reach)
	LinkDowns, LongDowns   int
	AckLosses              int           // bursts of dropped ACKs
	Flaps                  int           // short downs of a backup path not drawn (flapGap)
	Virtual                time.Duration // virtual time the run took
	Trace                  uint64        // hash of every event, in order
	Loss, Reorder          float64
	QPs                    int
	Fallbacks              uint64       // the failover layer's fallback rounds (Failover)
	Recoveries             uint64       // send sides back on the default NIC (Failover)
	Fillers                uint64       // SENDs consuming the peer's stale receives on a backup (Failover)
	Chains                 uint64       // moves from a failed backup to the next (Failover)
	Refused                uint64       // fallbacks refused (Failover: an unsafe WR outstanding)
	ResetRounds            uint64       // rounds that only reset the default QPs (Failover)
	NotificationsResent    uint64       // round notifications sent again, no reply in time (Failover)
	CtlDrops               int          // control messages dropped (Config.CtlDrop)
	Ineligible             int          // posts flagged failover.SendIneligible
	MaxQueue, MaxCQQueue   int          // the largest failover QP and CQ queue seen (memory.go)
	WRITE, SEND, READ, FAA int          // posts of each kind (WRITE_WITH_IMM counted as SEND)
	CAS                    int          // CMP_AND_SWP posts (in the runs that swap instead of add)
	Inline                 int          // posts with SendInline (in the runs that post inline: inline.go)
	Queries                int          // ibv_query_qp calls (in the runs that query: query.go)
	Stops                  int          // QPs the application moved to ERR (stop.go)
	Destroys               int          // of those, QPs it then destroyed (stop.go)
	RecvOnly               bool         // pair 0's host-1 QP was left in RTR (recvonly.go)
	Access                 verbs.Access // the QPs' remote access in a restricted run, else 0 (access.go)
	Deep                   bool         // deep receive queues and a send CQ of their own (deep.go)
	Faults                 FaultCounts  // NIC, KV and pause faults drawn (faults.go)
	// LinkEvents counts the link events the contexts read, LinkFallbacks the fallbacks a
	// down event started (Failover, in the runs with link events: linkwatch.go),
	// LinkUpProbes the probes an up event brought forward.
	LinkEvents, LinkFallbacks, LinkUpProbes uint64
	// RefusalsResent counts the refusals sent again on another control endpoint, the first
	// lost with its own (failover.Stats.RefusalsResent).
	RefusalsResent uint64
}

// Violation is a broken invariant, with the events that led to it.
type Violation struct {
	Seed               uint64
	Failover, Recovery bool // Config.Failover, Config.Recovery
	Backups            int  // Config.Backups
	CtlDrop            int  // Config.CtlDrop
	Shapes             bool // Config.Shapes
	Step               int
	What               string
	Tail               []string // the last events, oldest first
	Err                error    // ErrStuck, or nil
}

// Unwrap returns the sentinel the violation names, if any.
func (v *Violation) Unwrap() error { return v.Err }

func (v *Violation) Error() string {
	layer := ""
	switch {
	case v.Recovery:
		layer = "SHIFT_SIM_FAILOVER=recovery "
	case v.Failover:
		layer = "SHIFT_SIM_FAILOVER=1 "
	}
	if v.Failover && v.Backups > 1 {
		layer += fmt.Sprintf("SHIFT_SIM_BACKUPS=%d ", v.Backups)
	}
	if v.Failover && v.CtlDrop > 0 {
		layer += fmt.Sprintf("SHIFT_SIM_CTLDROP=%d ", v.CtlDrop)
	}
	if v.Failover && v.Shapes {
		layer += "SHIFT_SIM_SHAPES=1 "
	}
	return fmt.Sprintf("sim: seed %d, step %d: %s\nlast events:\n  %s\nreplay: %sSHIFT_SIM_SEED=%d go test -count=1 ./internal/sim -run TestReplay -v",
		v.Seed, v.Step, v.What, strings.Join(v.Tail, "\n  "), layer, v.Seed)
}

// ErrStuck is wrapped by a Violation when signaled WRs never complete.
var ErrStuck = errors.New("sim: work left without a completion")

// event kinds of the trace.
const (
	evPost = iota + 1
	evWC
	evRecvWC
	evNIC
	evDeliver
	evClock
	evDown
	evUp
	evRecv
	evPostErr
	evAckLoss
	evCtx
	evYield
	evFault
	evQuery
	evStop
)

var evNames = [...]string{evPost: "post", evWC: "wc", evRecvWC: "recv-wc", evNIC: "nic", evDeliver: "deliver",
	evClock: "clock", evDown: "link-down", evUp: "link-up", evRecv: "post-recv", evPostErr: "post-err", evAckLoss: "ack-loss", evCtx: "ctx-step", evYield: "yield", evFault: "fault", evQuery: "query", evStop: "stop"}

type event struct {
	step       int
	at         time.Duration // virtual time since the run began
	kind       int
	a, b, c, d uint64
}

func (e event) String() string {
	return fmt.Sprintf("%6d %12v %-9s %#x %#x %#x %#x", e.step, e.at, evNames[e.kind], e.a, e.b, e.c, e.d)
}

// runner is one run's state.
type runner struct {
	cfg  Config
	w    *World
	r    *rand.Rand
	res  Result
	step int
	hash uint64
	tail [64]event
	nev  int
	wcs  [8]verbs.WC
	// chainLeft counts the chained failure's scheduled link downs still to come.
	chainLeft int
	// ackGen counts each endpoint's bursts of lost ACKs (ackLoss), so that the end of one
	// does not cut a later one short.
	ackGen []uint64
	// pathUp is, over the failover layer, when the latest link down on each backup path
	// (backup n of both hosts, indexed by n) ends (linkFault, flapGap).
	pathUp []time.Time
	// rr draws the unsafe WRs of a risky run (risky.go) on a stream of its own.
	rr    *rand.Rand
	risky bool
	fx    faultState // NIC, KV and pause faults (faults.go)
	// limit is the step budget of the workload's loop: cfg.MaxSteps, extended while a host
	// is paused (pauseEnded, pausedNow).
	limit int
	late  lateState // late receive CQEs (latecqe.go)
	// cas: the run's atomics are CMP_AND_SWPs rather than FETCH_AND_ADDs (drawCAS).
	cas bool
	// qr draws the application's queries of a querying run (query.go); nil: none.
	qr *rand.Rand
	// stop plans the application's stop of a QP (stop.go).
	stop stopState
	// access is the QPs' remote access in a restricted run, else 0 (access.go).
	access verbs.Access
}

func (s *runner) record(kind int, a, b, c, d uint64) {
	ev := event{s.step, s.w.clk.Now().Sub(epoch), kind, a, b, c, d}
	for _, x := range [...]uint64{uint64(ev.step), uint64(kind), a, b, c, d} {
		s.hash ^= x
		s.hash *= 0x100000001b3
	}
	s.tail[s.nev%len(s.tail)] = ev
	s.nev++
}

func (s *runner) violation(format string, args ...any) *Violation {
	v := &Violation{Seed: s.cfg.Seed, Failover: s.cfg.Failover, Recovery: s.cfg.Recovery, Backups: s.cfg.Backups, CtlDrop: s.cfg.CtlDrop, Shapes: s.cfg.Shapes, Step: s.step, What: fmt.Sprintf(format, args...)}
	for i := max(0, s.nev-len(s.tail)); i < s.nev; i++ {
		v.Tail = append(v.Tail, s.tail[i%len(s.tail)].String())
	}
	v.Tail = append(v.Tail, s.faultLog()...)
	if s.cfg.Failover {
		for _, e := range s.w.ends {
			if q, ok := e.qp.(*failover.QP); ok {
				v.Tail = append(v.Tail, fmt.Sprintf("host %d pair %d: %v/%v, err %v", e.host, e.pair, q.SendState(), q.RecvState(), q.Err()))
				v.Tail = append(v.Tail, wireOf("  default", e.h.nics[0], q.QPN()))
				if b := q.Backup(); b != nil {
					v.Tail = append(v.Tail, wireOf(fmt.Sprintf("  backup %d", q.BackupIndex()), e.h.nics[1+q.BackupIndex()], b.QPN()))
				}
			}
		}
		for h, x := range s.w.hosts {
			v.Tail = append(v.Tail, fmt.Sprintf("host %d: %+v", h, x.fo.Stats()))
		}
	}
	return v
}

// wireOf describes QP qpn of device d as its RC engine sees it, for a violation's report.
func wireOf(what string, d *nic.Device, qpn uint32) string {
	q := d.QP(qpn)
	if q == nil {
		return fmt.Sprintf("%s QP %#x: gone", what, qpn)
	}
	if r, ok := q.Transport().(*rc.QP); ok {
		return fmt.Sprintf("%s QP %#x: %+v %s", what, qpn, r.Stats(), q.Describe())
	}
	return fmt.Sprintf("%s QP %#x: %s", what, qpn, q.Describe())
}

// Run runs one simulation; a broken invariant is a *Violation.
func Run(cfg Config) (Result, error) {
	if cfg.Ops == 0 {
		cfg.Ops = 300
	}
	if cfg.MaxSteps == 0 {
		cfg.MaxSteps = 200_000
		if cfg.Failover {
			cfg.MaxSteps = 500_000 // a run lasts until every QP is back on its default NIC
		}
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5348494654)) // "SHIFT"
	if cfg.QPs == 0 {
		cfg.QPs = 1 + r.IntN(3)
	}
	// RC reach: 4.096 µs × 2^10 × (1 + 3 retries) ≈ 17 ms of virtual time. Over the failover
	// layer the workload's faults on a backup path must stay ones RC rides out (one backup:
	// a backup that fails too fails the QP).
	attr := verbs.ConnectAttr{Timeout: 10, RetryCnt: 3, RNRRetry: 7, MinRNRTimer: 1}
	if cfg.Failover {
		// 16.8 ms × 8 = 134 ms: a backup path's faults (short downs, loss, lost ACKs, on
		// both ends at once) stay well inside it; a default NIC's long down is longer.
		attr.Timeout, attr.RetryCnt = 12, 7
	}
	s := &runner{cfg: cfg, r: r, hash: 0xcbf29ce484222325}
	if cfg.Backups == 0 {
		cfg.Backups = 1
	}
	s.cfg = cfg
	s.drawRisk()
	s.drawCAS()
	s.qr = drawQueries(cfg.Seed, cfg.Failover)
	s.stop = drawStop(cfg.Seed, cfg.Failover, cfg.Ops)
	s.access = drawAccess(cfg.Seed, cfg.Failover && cfg.Shapes)
	attr.Access = s.access
	links := cfg.Failover && drawLinkWatch(cfg.Seed)
	recvOnly := cfg.Failover && cfg.Recovery && drawRecvOnly(cfg.Seed)
	var drops *ctlDropper
	var dropCtl func() bool
	if cfg.Failover && cfg.CtlDrop > 0 {
		drops = &ctlDropper{n: cfg.CtlDrop}
		dropCtl = drops.drop
	}
	deep := drawDeep(cfg.Seed, cfg.Failover && cfg.Shapes)
	w, err := newWorld(cfg.QPs, attr, cfg.Failover, cfg.Recovery, cfg.Backups, links, recvOnly, deep, drawInline(cfg.Seed), s.yield, dropCtl)
	if err != nil {
		return Result{}, err
	}
	s.w = w
	s.res.Seed, s.res.QPs = cfg.Seed, cfg.QPs
	s.res.RecvOnly = recvOnly
	s.res.Access = s.access
	s.res.Deep = deep
	err = s.run()
	s.endFaults()
	if drops != nil {
		s.res.CtlDrops = drops.dropped
	}
	if cfg.Failover {
		for _, h := range w.hosts {
			st := h.fo.Stats()
			s.res.Fallbacks += st.Fallbacks
			s.res.Recoveries += st.Recoveries
			s.res.Fillers += st.Fillers
			s.res.Fillers += st.Fillers
			s.res.Chains += st.Chains
			s.res.LinkEvents += st.LinkEvents
			s.res.LinkFallbacks += st.LinkFallbacks
			s.res.LinkUpProbes += st.LinkUpProbes
			s.res.Refused += st.Refused
			s.res.RefusalsResent += st.RefusalsResent
			s.res.ResetRounds += st.ResetRounds
			s.res.NotificationsResent += st.NotificationsResent
		}
	}
	s.res.Steps, s.res.Trace = s.step, s.hash
	s.res.Virtual = w.clk.Now().Sub(epoch)
	return s.res, errors.Join(err, w.Close())
}

func (s *runner) run() error {
	s.setupFaults()
	if err := s.shadows(); err != nil {
		return err
	}
	s.drawFaults()
	s.faults()
	s.chainFaults()
	for _, e := range s.w.ends {
		n := rqDepth / 2
		if s.w.rq == deepRQ {
			n = deepRQ // posted in full, as ib_send_lat does
		}
		for range n {
			if _, err := e.postRecv(); err != nil {
				return fmt.Errorf("sim: post_recv: %w", err)
			}
		}
	}
	posts, tailed := 0, false
	s.limit = s.cfg.MaxSteps
	for ; s.step < s.limit || s.pausedNow() && s.step < 4*s.cfg.MaxSteps; s.step++ {
		s.chainStep()
		s.faultStep()
		draining := posts >= s.cfg.Ops && s.chainLeft == 0 && s.fx.left == 0
		if draining && !tailed {
			tailed = true
			// An unsignaled run at the end of a queue completes only with a signaled WR
			// behind it.
			for _, e := range s.w.ends {
				if n := len(e.sq); n > 0 && !e.sq[n-1].signaled {
					if err := s.postOn(e, verbs.WRRDMAWrite, true, false); err != nil {
						return err
					}
				}
			}
		}
		if err := s.observe(); err != nil {
			return err
		}
		if err := s.queryStep(); err != nil {
			return err
		}
		if err := s.stopStep(posts); err != nil {
			return err
		}
		if s.step%memEvery == 0 {
			if err := s.memCheck(); err != nil {
				return err
			}
		}
		if draining && s.quiet() {
			if err := s.memCheck(); err != nil {
				return err
			}
			return s.final()
		}
		switch x := s.r.IntN(100); {
		case x < 30 && !draining:
			if err := s.postOne(); err != nil {
				return err
			}
			posts++
		case x < 40:
			if err := s.replenish(); err != nil {
				return err
			}
		case x < 60:
			if err := s.poll(s.r.IntN(2)); err != nil {
				return err
			}
		case x < 72:
			s.nicStep()
		case x < 80:
			s.ctxStep(s.r.IntN(2))
		case x < 95:
			s.deliver()
		default:
			if err := s.tick(false); err != nil {
				return err
			}
		}
		if s.cfg.Recovery && s.step >= s.cfg.MaxSteps/2 {
			// With recovery the run ends only once every QP is back on its default NIC
			// with every link up. The workload is over within a few thousand steps; what
			// follows is the recovery under a storm that never ended: a default NIC's long
			// down (past the 134 ms reach) is drawn about every 40,000 steps (~60 ms of
			// virtual time) and lasts 140-200 ms, so "all back and all up" needed a lucky
			// gap and a run could end inside a down with its recoveries still in flight,
			// each with a pending timer (seed 514: the default link down for 170 ms when
			// the 500,000 steps ran out). The storm ends halfway through the budget; the
			// second half checks the liveness that matters: once the faults stop, every
			// QP comes back.
			continue
		}
		switch s.r.IntN(4000) {
		case 0:
			s.linkFault()
		case 1:
			s.ackLoss()
		}
	}
	v := s.violation("%v: %d steps, still %s", ErrStuck, s.step, s.outstanding())
	v.Err = ErrStuck
	return v
}

// shadows steps the world until both failover contexts ran their shadow verbs (the backup
// QPs exist and are connected), as an application's WaitShadow would wait.
func (s *runner) shadows() error {
	if !s.cfg.Failover {
		return nil
	}
	for ; s.step < s.cfg.MaxSteps; s.step++ {
		done := true
		for _, h := range s.w.hosts {
			ok, err := h.fo.Shadowed()
			if err != nil {
				return s.violation("shadow verbs: %v", err)
			}
			done = done && ok
		}
		if done {
			return nil
		}
		switch s.r.IntN(4) {
		case 0:
			s.ctxStep(s.r.IntN(2))
		case 1:
			s.nicStep()
		case 2:
			s.deliver()
		default:
			_ = s.tick(false) // the workload has not started: nothing is outstanding
		}
	}
	return s.violation("%v: the shadow verbs never finished", ErrStuck)
}

func (s *runner) nicStep() {
	i := s.r.IntN(len(s.w.nics))
	if s.w.nics[i].Step() {
		s.record(evNIC, uint64(i), 0, 0, 0)
	}
}

func (s *runner) deliver() {
	if s.w.cl.Fabric.Step() {
		s.record(evDeliver, 0, 0, 0, 0)
	}
}

func (s *runner) ctxStep(h int) {
	if s.paused(h) {
		return
	}
	if fo := s.w.hosts[h].fo; fo != nil && fo.Step() {
		s.record(evCtx, uint64(h), 0, 0, 0)
	}
}

// yield is what the failover layer calls while it waits for a NIC (Options.Yield): a few
// steps of the NICs, the fabric and the clock, drawn from the same seed. Never a context's
// step or an application operation: the caller is inside one.
func (s *runner) yield() {
	s.record(evYield, 0, 0, 0, 0)
	for range 1 + s.r.IntN(4) {
		switch s.r.IntN(3) {
		case 0:
			s.nicStep()
		case 1:
			s.deliver()
		default:
			_ = s.tick(true) // checks nothing inside yield
		}
	}
}

// faults draws the fabric's standing faults: loss, delay and reordering on each endpoint.
func (s *runner) faults() {
	s.res.Loss = []float64{0, 0, 0.001, 0.01, 0.05}[s.r.IntN(5)]
	s.res.Reorder = []float64{0, 0, 0.01, 0.1}[s.r.IntN(4)]
	for i, ep := range s.endpoints() {
		tx := ep.Faults(fabric.TX)
		tx.SetLoss(s.lossAt(i))
		tx.SetDelay(time.Duration(s.r.IntN(5))*time.Microsecond, time.Duration(s.r.IntN(20))*time.Microsecond)
		if s.res.Reorder > 0 {
			tx.SetReorder(s.res.Reorder, 1+s.r.IntN(3))
		}
	}
}

// lastPathLoss bounds the random loss on the last backup path over the failover layer, the
// path the run keeps alive (no long downs there, short ones flapGap apart): RC must ride out
// its faults, or the QP's failure with every path gone is its documented error, not a
// property SHIFT can keep. At 5 % loss on each direction a try of a 4 KB READ (its request
// and four response packets) fails about one time in four, so eight in a row, the 134 ms
// reach, come about once in 65,000 READs that meet them, sooner beside a burst of lost ACKs,
// short downs and the sequence NAKs of reordering, which the emulator counts against the
// retries as rdma_rxe does. Simulation seed 253071 (recovery, two backups) met it: a READ
// on the last backup lost its request or response in all eight tries while the other
// paths were down past the reach (docs/STATUS.md). At 1 % a try fails about one time in
// twenty. A lossless fabric, which RoCE deployments run, loses far less. The other paths
// keep the drawn loss: their failures are SHIFT's to hide.
const lastPathLoss = 0.01

// lossAt is the random loss of endpoint i (endpoints' order): the drawn loss, bounded on the
// last backup path over the failover layer (lastPathLoss). The per-packet draws are the
// same either way (Faults draws for any loss above zero), so the bound changes outcomes on
// that path only.
func (s *runner) lossAt(i int) float64 {
	return pathLoss(s.res.Loss, i, len(s.w.hosts[0].nics), s.cfg.Failover)
}

// pathLoss is lossAt for a run's drawn loss, nics NICs per host and over the failover layer
// or not.
func pathLoss(loss float64, i, nics int, failover bool) float64 {
	if failover && nics > 1 && i%nics == nics-1 {
		return min(loss, lastPathLoss)
	}
	return loss
}

// endpoints are the fabric endpoints of every NIC, host by host.
func (s *runner) endpoints() []*fabric.Endpoint {
	var eps []*fabric.Endpoint
	for h := range 2 {
		for n := range s.w.hosts[h].nics {
			eps = append(eps, s.w.cl.Endpoint(h, n, 1))
		}
	}
	return eps
}

// linkFault takes one NIC's link down for a while: mostly less than the RC reach (the
// transport retransmits), sometimes more (over the provider the QPs fail; over the failover
// layer only a default NIC's link goes down for that long, and its QPs must move to the
// backup).
func (s *runner) linkFault() {
	eps := s.endpoints()
	i := s.r.IntN(len(eps))
	d := time.Duration(100+s.r.IntN(8000)) * time.Microsecond
	nics := len(s.w.hosts[0].nics)
	if s.r.IntN(5) == 0 && (!s.cfg.Failover || i%nics != nics-1) {
		d = s.longDown()
	} else if n := i % nics; s.cfg.Failover && n > 0 && n < len(s.pathUp) && s.w.clk.Now().Before(s.pathUp[n].Add(flapGap)) {
		s.res.Flaps++ // a flapping backup path (flapGap): not drawn
		return
	}
	s.down(i, d)
}

// flapGap is the least time a backup path is up between two of its short downs over the
// failover layer: more than one RC retransmission timeout (16.8 ms), so that of two
// consecutive tries of a WR at most one meets a down.
//
// Short downs are drawn at a rate per step, each on any endpoint, independently: a busy
// run draws one every 7 ms or so. Seed 14092 (one backup, its default NIC dead) drew eight
// on one host's backup link and one on the peer's in 100 ms, each 0.5 to 8 ms long: the
// ACK of a backup QP's last try that got through (62 ms) and each of the six
// retransmissions after it, 16.8 ms apart, met one of them, and the QP failed with retry
// exceeded at 179 ms (its 134 ms reach), although the links were up most of that time and
// the peer's QP had received and ACKed everything. To RC, as to real hardware, a link that
// flaps in step with the retry timer is a link down for longer than the reach, and with
// one backup the last backup's failure is the QP's documented error. The invariant that
// short downs cost nothing holds for downs RC can ride out, so a backup path's short downs
// leave a try between them; a default path's, on which a failure only starts a fallback,
// are not bounded.
const flapGap = 20 * time.Millisecond

// longDown is a link down past the RC reach.
func (s *runner) longDown() time.Duration {
	if s.cfg.Failover {
		return time.Duration(140+s.r.IntN(60)) * time.Millisecond // past the 134 ms reach
	}
	return time.Duration(30+s.r.IntN(70)) * time.Millisecond
}

// down takes endpoint i's link down for d, unless it is down already (then it reports false).
func (s *runner) down(i int, d time.Duration) bool {
	ep := s.endpoints()[i]
	if !ep.LinkUp() {
		return false
	}
	if d > 20*time.Millisecond {
		s.res.LongDowns++
	}
	s.res.LinkDowns++
	ep.SetLinkUp(false)
	s.record(evDown, uint64(i), uint64(d), 0, 0)
	if nics := len(s.w.hosts[0].nics); s.cfg.Failover && i%nics > 0 {
		if s.pathUp == nil {
			s.pathUp = make([]time.Time, nics)
		}
		if end := s.w.clk.Now().Add(d); end.After(s.pathUp[i%nics]) {
			s.pathUp[i%nics] = end
		}
	}
	s.w.clk.AfterFunc(d, func() {
		ep.SetLinkUp(true)
		s.record(evUp, uint64(i), 0, 0, 0)
	})
	return true
}

// chainFaults starts, with several backups, a chained failure: one host's default link goes
// down past the RC reach early in the run, and once the QPs fell back (chainStep), the first
// backup's link of one host goes down too, while traffic still runs; the workload posts until
// both happened.
func (s *runner) chainFaults() {
	if !s.cfg.Failover || s.cfg.Backups < 2 {
		return
	}
	nics := len(s.w.hosts[0].nics)
	def := s.r.IntN(2) * nics
	s.chainLeft = 2
	s.w.clk.AfterFunc(time.Duration(s.r.IntN(2000))*time.Microsecond, s.chainFirst(def))
}

// chainStep takes the first backup's link down once the first fallback round ran (or was
// refused, or a QP the application stopped left none to run: stop.go).
func (s *runner) chainStep() {
	if s.chainLeft != 1 {
		return
	}
	for _, h := range s.w.hosts {
		if st := h.fo.Stats(); st.Fallbacks > 0 || st.Refused > 0 || st.AppStops > 0 {
			if s.down(s.r.IntN(2)*len(s.w.hosts[0].nics)+1, s.longDown()) {
				s.chainLeft-- // else a short down holds that link: try again next step
			}
			return
		}
	}
}

// ackBurst bounds a burst of lost ACKs in time: well under one RC retransmission timeout
// (4.2 ms over the provider, 16.8 ms over the failover layer).
const ackBurst = time.Millisecond

// ackLoss drops the next few ACKs one host sends within ackBurst: the data landed, its
// sender does not know.
//
// The burst ends with its window. A count left armed until that many ACKs went out waited,
// on a path with nothing else in flight, for the ACKs of the next retransmissions of a lone
// WR (a fence, a probe, a filler) and ate up to three of its tries, 17 ms apart, however
// long after the burst they came; with a link down and the random loss the 8 tries of the
// 134 ms reach were all lost (recovery seeds 52 and 63: the backup QP's fence WR failed with
// retry exceeded while the peer's backup QP ACKed every try). A burst of lost ACKs on a
// real fabric (a congested switch queue) is a moment's, not a count of the next ACKs
// whenever they come.
func (s *runner) ackLoss() {
	eps := s.endpoints()
	h, n := s.r.IntN(len(eps)), 1+s.r.IntN(3)
	f := eps[h].Faults(fabric.TX)
	f.DropNextAcks(n)
	if s.ackGen == nil {
		s.ackGen = make([]uint64, len(eps))
	}
	s.ackGen[h]++
	gen := s.ackGen[h]
	s.w.clk.AfterFunc(ackBurst, func() {
		if s.ackGen[h] == gen { // not a later burst on the same endpoint
			f.DropNextAcks(0)
		}
	})
	s.res.AckLosses++
	s.record(evAckLoss, uint64(h), uint64(n), 0, 0)
}

// tick moves the virtual clock: by a few microseconds, or, when nothing in the world can run
// (every NIC, the fabric and both contexts found no work), to the next timer or packet, as
// an idle machine would. Jumping while work is waiting would be a paused process: a pause
// longer than a timeout makes the timeout's failure legitimate, which this workload does not
// draw.
//
// Inside yield (inYield) the contexts are not stepped: one of them is inside its own step.
func (s *runner) tick(inYield bool) error {
	d := time.Duration(s.r.IntN(20)) * time.Microsecond
	if s.r.IntN(2) == 0 && s.idle(!inYield) {
		if next, ok := s.nextEvent(); ok {
			small := d
			d = max(d, next.Sub(s.w.clk.Now()))
			switch {
			case inYield:
				d = min(d, yieldJump) // the waiting thread polls (yieldJump, pause.go)
			case d > longJump:
				// Completions waiting in a CQ are work too: the application polls them
				// before a machine would sit idle for so long. Without this, 12 of the
				// 10,000 failover runs jumped to the 1 h probe timer before their last
				// polls (their virtual time an hour).
				n, err := s.pollQueued()
				if err != nil {
					return err
				}
				if n > 0 {
					d = small
				}
			}
		} else if !inYield {
			if err := s.stuckNow(); err != nil {
				return err
			}
		}
	}
	s.w.clk.Advance(d)
	s.record(evClock, uint64(d), 0, 0, 0)
	return nil
}

// longJump is the clock jump past which tick lets the application poll first.
const longJump = time.Second

// pollQueued polls both hosts' CQs once each (as stuckNow does) and returns how many
// completions the application took.
func (s *runner) pollQueued() (int, error) {
	n := s.res.WCs
	for h := range s.w.hosts {
		if err := s.poll(h); err != nil {
			return 0, err
		}
	}
	return s.res.WCs - n, nil
}

// idle runs one step of everything that runs by itself (the contexts too, with ctxs) and
// reports whether none had work.
func (s *runner) idle(ctxs bool) bool {
	busy := false
	for i, n := range s.w.nics {
		if n.Step() {
			s.record(evNIC, uint64(i), 0, 0, 0)
			busy = true
		}
	}
	if s.w.cl.Fabric.Step() {
		s.record(evDeliver, 0, 0, 0, 0)
		busy = true
	}
	for h := range s.w.hosts {
		if fo := s.w.hosts[h].fo; ctxs && fo != nil && !s.paused(h) && fo.Step() {
			s.record(evCtx, uint64(h), 0, 0, 0)
			busy = true
		}
	}
	return !busy
}

func (s *runner) nextEvent() (time.Time, bool) {
	t1, ok1 := s.w.clk.NextAt()
	t2, ok2 := s.w.cl.Fabric.NextDue()
	switch {
	case ok1 && ok2:
		if t2.Before(t1) {
			return t2, true
		}
		return t1, true
	case ok1:
		return t1, true
	}
	return t2, ok2
}

var ops = [...]verbs.WROpcode{verbs.WRRDMAWrite, verbs.WRRDMAWrite, verbs.WRRDMAWrite, verbs.WRSend, verbs.WRSend,
	verbs.WRRDMAWriteWithImm, verbs.WRRDMARead, verbs.WRRDMARead, verbs.WRAtomicFetchAdd}

func (s *runner) postOne() error {
	e := s.w.ends[s.r.IntN(len(s.w.ends))]
	op := ops[s.r.IntN(len(ops))]
	if s.paused(e.host) || s.muted(e.host) || e.recvOnly || e.gone {
		return nil
	}
	inelig := false
	if s.cfg.Failover {
		// An atomic or ineligible WR outstanding at a failure is not retransmitted
		// (docs/FAILOVER.md, the boundary): its QP fails. Only in a share of the runs.
		op, inelig = s.riskyOp(e, op)
	}
	return s.postOn(e, op, false, inelig)
}

func (s *runner) postOn(e *end, op verbs.WROpcode, signal, inelig bool) error {
	if op == verbs.WRAtomicFetchAdd && s.cas {
		op = verbs.WRAtomicCmpAndSwp
	}
	op = permitted(s.access, op)
	p, err, ok := e.post(s.r, op, signal, inelig)
	if !ok {
		return nil
	}
	if err != nil {
		// A post on a QP the NIC moved to ERR before its error completion was polled: over
		// the provider, or over the failover layer on a QP that failed for good (refused, or
		// its last backup gone); SHIFT hides it from any other.
		if errors.Is(err, verbs.ErrQPState) && (!s.cfg.Failover || e.refused || e.qp.(*failover.QP).SendState() == failover.SendFailed) {
			s.record(evPostErr, uint64(e.host), uint64(e.pair), uint64(op), 0)
			return nil
		}
		return s.violation("post %v on host %d pair %d: %v", op, e.host, e.pair, err)
	}
	if err := s.postAccepted(e, op); err != nil {
		return err
	}
	switch op {
	case verbs.WRRDMAWrite:
		s.res.WRITE++
	case verbs.WRSend, verbs.WRRDMAWriteWithImm:
		s.res.SEND++
	case verbs.WRRDMARead:
		s.res.READ++
	case verbs.WRAtomicFetchAdd:
		s.res.FAA++
	case verbs.WRAtomicCmpAndSwp:
		s.res.CAS++
	}
	s.res.Posts++
	if p.inline {
		s.res.Inline++
	}
	if inelig {
		s.res.Ineligible++
	}
	s.record(evPost, uint64(e.host)<<8|uint64(e.pair), uint64(op), p.wrid, b2u(p.signaled))
	return nil
}

func (s *runner) replenish() error {
	e := s.w.ends[s.r.IntN(len(s.w.ends))]
	if s.paused(e.host) || e.gone {
		return nil
	}

	ok, err := e.postRecv()
	if err != nil {
		// As for a send (postOn): over the provider, or on a QP the failover layer gave up.
		if errors.Is(err, verbs.ErrQPState) && (!s.cfg.Failover || e.refused || e.qp.(*failover.QP).RecvState() == failover.RecvFailed) {
			return nil
		}
		return s.violation("post_recv on host %d pair %d: %v", e.host, e.pair, err)
	}
	if ok {
		s.record(evRecv, uint64(e.host)<<8|uint64(e.pair), e.recvPosted, 0, 0)
	}
	return nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (s *runner) poll(h int) error {
	if s.paused(h) {
		return nil
	}
	if err := s.pollCQ(h, s.w.hosts[h].cq); err != nil {
		return err
	}
	if scq := s.w.hosts[h].scq; scq != nil && s.sendWaited(h) {
		return s.pollCQ(h, scq)
	}
	return nil
}

// sendWaited reports whether an application QP of host h waits for a send completion: a
// deep run's application polls its send CQ only then, as ib_send_lat polls its send CQ only
// after a send (deep.go); what else completes there (SHIFT's fillers) waits until it does.
func (s *runner) sendWaited(h int) bool {
	for _, e := range s.w.ends {
		if e.host != h || e.gone {
			continue
		}
		for i := range e.sq {
			if e.sq[i].signaled {
				return true
			}
		}
	}
	return false
}

// pollCQ polls one of host h's CQs once.
func (s *runner) pollCQ(h int, cq verbs.CQ) error {
	n, err := cq.Poll(s.wcs[:])
	if err != nil {
		return s.violation("poll host %d: %v", h, err)
	}
	for i := range n {
		wc := &s.wcs[i]
		s.res.WCs++
		e := s.w.byQPN[h][wc.QPNum]
		if e == nil {
			return s.violation("host %d: completion for unknown QP %#x", h, wc.QPNum)
		}
		if e.gone {
			return s.violation("host %d: completion %+v of QP %#x after the application destroyed it", h, *wc, wc.QPNum)
		}
		if wc.WRID&recvTag != 0 {
			if wc.Status == verbs.WCSuccess && wc.Opcode&verbs.WCRecv == 0 {
				return s.violation("host %d pair %d: receive wr_id %#x completed with send opcode %v", h, e.pair, wc.WRID, wc.Opcode)
			}
			s.record(evRecvWC, uint64(h)<<8|uint64(e.pair), wc.WRID, uint64(wc.Status), uint64(wc.ByteLen))
			if err := s.recvDone(e, wc); err != nil {
				return err
			}
			continue
		}
		s.record(evWC, uint64(h)<<8|uint64(e.pair), wc.WRID, uint64(wc.Status), uint64(wc.Opcode))
		if err := s.sendDone(e, wc); err != nil {
			return err
		}
	}
	return nil
}

// sendDone retires the send WRs a completion covers, in order, and checks their effects.
func (s *runner) sendDone(e *end, wc *verbs.WC) error {
	k := -1
	for i := range e.sq {
		if e.sq[i].wrid == wc.WRID {
			k = i
			break
		}
	}
	if k < 0 {
		return s.violation("host %d pair %d: completion for wr_id %d, not outstanding (duplicate or unknown)", e.host, e.pair, wc.WRID)
	}
	if wc.Status != verbs.WCSuccess {
		s.res.Errors++
		if s.cfg.Failover {
			if err := s.errAllowed(e, "send", wc.WRID, wc.Status); err != nil {
				return err
			}
		}
		e.failed = true
		e.sq = append(e.sq[:0], e.sq[k+1:]...)
		return nil
	}
	if e.failed {
		return s.violation("host %d pair %d: wr_id %d succeeded after the QP's error", e.host, e.pair, wc.WRID)
	}
	for i := range k {
		if e.sq[i].signaled {
			return s.violation("host %d pair %d: wr_id %d completed before signaled wr_id %d posted earlier", e.host, e.pair, wc.WRID, e.sq[i].wrid)
		}
	}
	if !e.sq[k].signaled {
		return s.violation("host %d pair %d: completion for unsignaled wr_id %d", e.host, e.pair, wc.WRID)
	}
	for i := 0; i <= k; i++ {
		if err := s.check(e, &e.sq[i]); err != nil {
			return err
		}
	}
	e.sq = append(e.sq[:0], e.sq[k+1:]...)
	return nil
}

// check verifies what a retired, successful WR did.
func (s *runner) check(e *end, p *sent) error {
	switch p.op {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		if !intact(e.peer.slot(p.target, p.n), uint64(e.host), uint64(e.pair), p.seq) {
			return s.violation("host %d pair %d: WRITE wr_id %d completed but its data is not at the peer", e.host, e.pair, p.wrid)
		}
	case verbs.WRRDMARead:
		if !bytes.Equal(e.slot(p.stage, p.n), e.peer.slot(readSrc, p.n)) {
			return s.violation("host %d pair %d: READ wr_id %d completed with wrong data", e.host, e.pair, p.wrid)
		}
	case verbs.WRAtomicFetchAdd, verbs.WRAtomicCmpAndSwp:
		// RC runs a QP's atomics in order, once each (a retransmitted one is answered from
		// the responder's replay, not run again): each finds the adds posted before it.
		if got := binary.LittleEndian.Uint64(e.slot(p.stage, 8)); got != p.before {
			return s.violation("host %d pair %d: %v wr_id %d returned %d, expected %d (an atomic ran twice, not at all, or out of order)", e.host, e.pair, p.op, p.wrid, got, p.before)
		}
		e.addSum += p.add
	}
	return nil
}

// recvDone checks a receive completion: the peer's next two-sided WR, intact.
func (s *runner) recvDone(e *end, wc *verbs.WC) error {
	if wc.Status != verbs.WCSuccess {
		e.recvFailed++
		if s.cfg.Failover {
			return s.errAllowed(e, "receive", wc.WRID&^recvTag, wc.Status)
		}
		return nil // flushed: this end's QP failed
	}
	if wc.WRID != recvTag|e.recvDone {
		return s.violation("host %d pair %d: receive wr_id %d completed, expected %d", e.host, e.pair, wc.WRID&^recvTag, e.recvDone)
	}
	off := e.recvAt(e.recvDone)
	buf := e.h.buf.Bytes()[off : off+int(wc.ByteLen)]
	e.recvDone++
	seq := e.expect
	if wc.Opcode == verbs.WCRecvRDMAWithImm {
		if uint64(wc.Imm) != seq&0xffffffff {
			return s.violation("host %d pair %d: WRITE_WITH_IMM %d arrived, expected %d (lost, duplicated or reordered)", e.host, e.pair, wc.Imm, seq)
		}
	} else if len(buf) < 8 || !intact(buf, uint64(e.peer.host), uint64(e.peer.pair), seq) {
		got := uint64(0)
		if len(buf) >= 8 {
			got = uint64(buf[0]) | uint64(buf[1])<<8 | uint64(buf[2])<<16 | uint64(buf[3])<<24
		}
		return s.violation("host %d pair %d: SEND %d arrived with %d bytes, seq %d (lost, duplicated, reordered or corrupt)", e.host, e.pair, seq, wc.ByteLen, got)
	}
	e.expect++
	return nil
}

// quiet reports whether every WR left has completed and every SEND that completed at its
// sender was received.
//
// Over the failover layer the run also waits for every QP to be back on the default NIC with
// every link up (the recovery is part of what is checked).
func (s *runner) quiet() bool {
	if s.chainLeft > 0 || s.fx.left > 0 {
		return false
	}
	if s.cfg.Failover && s.cfg.Recovery && s.defaultsHealthy() {
		for _, ep := range s.endpoints() {
			if !ep.LinkUp() {
				return false
			}
		}
		for _, e := range s.w.ends {
			q := e.qp.(*failover.QP)
			if q.SendState() == failover.SendFailed || q.RecvState() == failover.RecvFailed {
				continue // refused for an unsafe WR (risky.go): it stays failed
			}
			if pq := e.peer.qp.(*failover.QP); pq.SendState() == failover.SendFailed || pq.RecvState() == failover.RecvFailed {
				// Its peer failed: stopped by the application (stop.go), or failed by SHIFT
				// (a handshake that got no reply, an unsafe WR). The peer's default QP stays
				// in ERR and sends no recovery notification, so this QP stays on the backup,
				// without an error (a receive-only one never probes; another one's probes
				// fail), as a plain RC QP whose peer went away learns nothing until it sends
				// (seed 12459, recovery, beyond the 10,000 seeds the tests run, on the tree of
				// 2026-11-28's earlier stops too, for a receive-only QP whose peer stopped;
				// seed 110095, recovery with two backups and dropped control messages, for
				// one whose peer's handshake timed out, failing on 2026-11-29's sixth stop
				// too). The peer's state says so, not its completions: a peer stopped with
				// nothing outstanding has no flush to report (seed 231931, recovery, a
				// receive-only QP whose peer the application stopped with nothing posted).
				continue
			}
			if q.SendState() != failover.SendDefault || q.RecvState() != failover.RecvDefault {
				return false
			}
		}
	}
	for _, e := range s.w.ends {
		if len(e.sq) > 0 && !(e == s.stop.victim && unsignaledOnly(e.sq)) {
			return false
		}
		if !e.peer.failed && e.expect != e.peer.twoSided {
			return false
		}
	}
	return true
}

func (s *runner) outstanding() string {
	var b strings.Builder
	for _, e := range s.w.ends {
		fmt.Fprintf(&b, "[host %d pair %d: %d sends outstanding", e.host, e.pair, len(e.sq))
		if len(e.sq) > 0 {
			p := &e.sq[0]
			fmt.Fprintf(&b, " (first: %v wr_id %d, signaled %v)", p.op, p.wrid, p.signaled)
		}
		fmt.Fprintf(&b, ", failed %v, received %d of %d] ", e.failed, e.expect, e.peer.twoSided)
	}
	return b.String()
}

// final checks what only the end shows: each FETCH_AND_ADD ran once.
func (s *runner) final() error {
	for _, e := range s.w.ends {
		got := e.peer.counter()
		if !e.failed && !e.refused && got != e.addSum {
			return s.violation("host %d pair %d: the peer's counter is %d, the completed adds sum to %d", e.host, e.pair, got, e.addSum)
		}
		if (e.failed || e.refused) && (got < e.addSum || got > e.addPosted) {
			return s.violation("host %d pair %d: the peer's counter is %d, outside [%d, %d]", e.host, e.pair, got, e.addSum, e.addPosted)
		}
	}
	return nil
}
