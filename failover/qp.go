package failover

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Kinds of backup WQEs, in posting order per queue.
const (
	kindApp    = 0
	kindCtrl   = 1 // SHIFT's control WR (notification, filler, SHIFT's fence WR); on a backup RQ a control RECV
	kindProbe  = 2 // recovery probe on the default QP
	kindNotify = 3 // recovery notification on the default QP (the fence's)
	kindStale  = 4 // an application RECV left on the backup RQ when the receive side recovered
	// kindHeld: a zero-length WRITE standing in for a signaled WR the peer had received, posted
	// behind a READ read again (heldWR): its completion is that WR's, with the opcode heldOps
	// keeps.
	kindHeld = 5
)

// What the classifier does with completions of the default QP.
const (
	defLive        = iota // account and buffer (Default, and the drain of a fallback)
	defDropped            // after a fallback: the default QP's completions are SHIFT's
	defPassThrough        // after a refused fallback: the application gets them as they are
	defTracked            // after the first fallback: classified by position (dSendKinds, dRecvKinds)
)

type ownedWC struct {
	cq *CQ
	wc verbs.WC
}

// sendRec is a send WR without a known completion: one the backup log keeps (bkLog) or one
// read back from the default QP's ring at a fallback (fromDef, at position pos there).
type sendRec struct {
	wr       verbs.SendWR
	inline   []byte // the inline payload the SGL points to
	twoSeq   uint32 // two-sided WRs posted before it
	twoSided bool
	signaled bool
	fromDef  bool
	pos      uint32
	// held: a zero-length WRITE stands in for this WR, which the peer had received (heldWR);
	// heldOp is the opcode its completion reports.
	held   bool
	heldOp verbs.WCOpcode
}

// QP is an RC queue pair: the default QP, its backup QP on the backup device and the state
// machines that decide where WRs go.
type QP struct {
	c        *Context
	pd       *PD
	scq, rcq *CQ
	sigAll   bool
	qpn      uint32
	cap      verbs.QPCap
	def      *provider.QP

	// sets holds one backup QP set per backup device (bkset.go); cur is the one in use (or
	// to be used by the next fallback). Written under mu, fifoMu and both CQ mutexes.
	sets []*bkSet
	cur  atomic.Int32
	// bkLog holds the application's send WRs posted on the backup QP in use and not known
	// to be complete (q.mu): what moves to the next backup when this one fails too.
	bkLog []sendRec
	// bkFreeSGL and bkFreeInl are the buffers of retired log records (bklog.go, fifoMu).
	bkFreeSGL [][]verbs.SGE
	bkFreeInl [][]byte
	// cpSGE is copyToBackupLocked's rewritten gather list (q.mu).
	cpSGE []verbs.SGE

	sendGate, recvGate postGate
	mach               machine
	mu                 qpMutex // closes the post gates' backup modes when taken (backupgate.go)

	// Sends on the default QP are not logged: the provider keeps a failed WQE and those
	// flushed behind it in the ring (SetRetainSends) and a fallback copies them to the
	// backup QP (defSendsLocked, copyToBackupLocked). defFrom (q.mu) is the ring position
	// from which the default QP's application WQEs are still SHIFT's to repost; twoSided is
	// the all-time count of two-sided WRs posted while the send side is off the default QP,
	// twoOff what the default QP's own count (provider TwoSidedPosted) is offset by while
	// it is on it (both q.mu, or the poster in Default).
	defFrom  uint32
	twoSided uint32
	twoOff   uint32
	maxSGE   int

	// Receive log.
	rlog     []recvRec
	rsge     []verbs.SGE // rstride scatter entries per record (rlog.go)
	rstride  int
	rmask    uint64
	rPosted  atomic.Uint64
	recvDone uint64 // application receives completed, all time (poller-owned)

	// Connection.
	attr          verbs.ConnectAttr
	local, remote verbs.Endpoint
	rtrAttr       verbs.QPAttr
	rtsAttr       verbs.QPAttr
	connectOps    []*shadowOp

	// Shared between posters and pollers of the backup QP.
	fifoMu       sync.Mutex
	errWCs       []ownedWC
	shiftErrSeen bool // a WR of SHIFT's own failed on the tracked default QP (this incarnation)
	failQueued   bool
	defMode      int // guarded by the CQ mutexes

	// Fallback (q.mu).
	// box holds the posts that found q.mu taken, for the engine (inbox.go).
	box inbox
	// pending holds the sends posted while where they go is not settled (a handshake, a
	// waiting round): copies that own their SGLs and inline payloads (roundwait.go).
	pending []sendRec
	// hsTimer: the handshake's or a reset round's wait (notifyresend.go), or the wait for a
	// receive-only peer's neverSent message (recvonly.go).
	hsTimer  clock.Timer
	failErr  error
	tErr     atomic.Int64 // first error completion polled (unix ns)
	tPrep    atomic.Int64 // notification posted
	tKept    atomic.Int64 // the ring decoded for the repost, after the notification (prepareLocked)
	tRepost  atomic.Int64 // peer's counter received, sends reposted
	tOK      atomic.Int64 // first application completion from the backup
	outSends []provider.SendWQE
	outRecvs []provider.RecvWQE
	// roundWait numbers the rounds' waits for a reply: a timer that fires for an earlier
	// one does nothing (notifyresend.go).
	roundWait uint64

	// A round waiting with q.mu released holds the application's posts (roundwait.go): the
	// hold word (table.go) until flushHeld runs, pauses the rounds released right now, rHeld
	// the receives at the receive log's tail not posted yet (all q.mu).
	flushQueued bool
	pauses      int
	rHeld       uint64

	// SHIFT's own share of a round, apart from the wait for the emulator or the peer
	// (fallbackSplit in measure_test.go): the time spent inside roundLocked this round, the
	// part of it the drain waited for the default NIC's flushes, and when the peer's
	// notification was polled from the control QP. Stored on the failure path only.
	tBusy   atomic.Int64 // ns inside roundLocked
	tDrain  atomic.Int64 // ns of that the drain waited for completions
	tPost   atomic.Int64 // ns of that inside the provider's posts of its messages and reposts
	tCmd    atomic.Int64 // ns of that inside the default QP's move to ERR (a device command)
	tPoll   atomic.Int64 // the peer's last notification polled (unix ns)
	tCtl    atomic.Int64 // tPoll of the notification that started or answered this round
	tPosted atomic.Int64 // the last reposted WR posted on the backup (unix ns)
	// tFirst: the first reposted WR posted on the backup (unix ns), and tPostFirst the
	// device time (tPost) of the round until then: the part of the round that stands
	// between the error and the first backup success, the rest overlapping its execution.
	tFirst, tPostFirst atomic.Int64
	// tPostPrep is tPost when the notification (or the reply) was posted: a peer's share
	// ends there, before its own reposts.
	tPostPrep atomic.Int64

	// Recovery (issue 6). The default QP's posted receives and signaled sends, by kind, in
	// posting order since its last reset (fifoMu); the fence (q.mu, its own lock inside).
	dSendKinds []uint8
	dRecvKinds []uint8
	fn         *fence.Fence
	later      []verbs.WC    // q.scq.mu: error completions behind the backup's (stopwithheld.go)
	destroyed  bool          // q.mu
	tracked    bool          // q.mu: the default QP's WRs are classified by position (defTracked)
	slow       bool          // q.mu: off the fast path, counted in the CQs' slow (gate.go)
	defGen     atomic.Uint64 // default QP incarnation (resets, ctlMsg.gen)
	nextGen    uint64        // q.mu: the incarnation this round's reset takes (0: defGen+1)
	probeRes   atomic.Int32  // 0 pending, 1 success, 2 failure of the last probe
	up         probeUp       // the probe schedule's part for up events (probe_up.go)
	wsCount    int           // WRs posted in WaitSignaled
	// The completion watchdog's view of the QP (watchdog.go; watchdog goroutine).
	wd, wdBk wdState
	// respRefused: the default QP's responder refused a request of the peer
	// (QP_ACCESS_ERR or QP_REQ_ERR on the async fd): a first flush is the application's.
	respRefused atomic.Bool
	tProbeOK    int64
	tFence      int64
	lastSwitch  atomic.Int64 // last switch-back (probe success → Default), ns
	lastStall   atomic.Int64 // last stall (fence WR posted → Default), ns

	// injHit: inject corrupted a WR of this QP; its LOC_PROT_ERR is SHIFT's, not the
	// application's.
	injHit atomic.Bool
	// injClosed: the send gate is kept closed for an armed injection (q.mu; injgate.go).
	injClosed bool
	// defsKept is the last list of the default ring's WQEs (q.mu; wqecopy.go).
	defsKept defsKept
	// appErr: the default QP failed by the application's own error (appErrorLocked); posts
	// go to it as without SHIFT. Under mu.
	appErr bool
	// deadFlushed: flushDeadLocked completed the default QP's WRs (once). Under mu.
	deadFlushed bool
	// appStopping: the application is moving the QP to ERR (appstop.go); its flushes are
	// the application's.
	appStopping atomic.Bool
	// appState is the state the application last moved the QP to (Modify): what Query
	// reports while SHIFT keeps the QP running.
	appState atomic.Uint32
	// defStopped: SHIFT moved the default QP to ERR in this incarnation (prepareLocked,
	// refuseLocked, resetDefaultLocked); its flushes are SHIFT's. Under mu.
	defStopped bool
	// peerRecvOnly: the peer's last notification said its QP was never moved to RTS (no
	// control RECV at our reset); toldRecvOnly: ours said so of this QP (recvonly.go). q.mu.
	peerRecvOnly, toldRecvOnly bool
	injWRs                     []verbs.SendWR
	injSGE                     []verbs.SGE
	// injKeys maps the lkeys inject corrupted in the default ring back to the application's
	// (poster-owned in Default; read by a fallback once the gates are closed).
	injKeys map[uint32]uint32
	bkWRs   []verbs.SendWR // scratch of postBackupLocked (q.mu)
	km      keyMemo        // the last key mappings of rewriteLocked (keymemo.go; q.mu or the backup mode)
	kmR     keyMemo        // the receive path's (q.mu, or the receive gate's backup mode)
	bkRWRs  []verbs.RecvWR // scratch of postRecvBackupLocked (q.mu)
	bkRSGE  []verbs.SGE
	bkSGE   []verbs.SGE
	// wqeDec is what was decoded of the default ring (wqedecode.go). q.mu.
	wqeDec wqeDecodes
	keysOK keysChecked // the last retransmission check's keys (retxcheck.go)

	stats qpCounters // this QP's share of the context's counters (status.go)
}

func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// CreateQP is ibv_create_qp for an RC QP; the shadow goroutine creates the backup QP (one
// more send and receive slot for SHIFT's control WRs), moves it to INIT with its control
// RECV and publishes qp/<default GID>/<QPN> → {backup GID, QPN, PSN}.
func (p *PD) CreateQP(a verbs.QPInitAttr) (verbs.QP, error) {
	scq, _ := a.SendCQ.(*CQ)
	rcq, _ := a.RecvCQ.(*CQ)
	if scq == nil || rcq == nil || scq.c != p.c || rcq.c != p.c {
		return nil, fmt.Errorf("failover: create_qp: %w: send and receive CQs of this context required", verbs.ErrInvalidArgument)
	}
	// The default QP holds SHIFT's own WRs beside the application's (the probe, the
	// recovery notification and the drain marker; the control RECV): it is created that
	// much larger, and the slots are kept back from the application, which sees the caps
	// it asked for, as rounded by the provider.
	dc := a.Cap
	dc.MaxSendWR += sendReserve
	dc.MaxRecvWR += recvReserve
	d, err := as[*provider.QP](p.def.CreateQP(verbs.QPInitAttr{SendCQ: scq.def, RecvCQ: rcq.def, Cap: dc, SigAll: a.SigAll, Handle: a.Handle}))
	if err != nil {
		return nil, fmt.Errorf("failover: create_qp: %w", err)
	}
	d.ReserveSend(sendReserve)
	d.ReserveRecv(recvReserve)
	c := p.c
	q := &QP{c: c, pd: p, scq: scq, rcq: rcq, sigAll: a.SigAll, def: d, qpn: d.QPN(), cap: d.Cap()}
	q.mu.send, q.mu.recv = &q.sendGate, &q.recvGate
	q.mach.transitions = &c.transitions
	q.mach.track.kick = c.statusKick()
	if !c.opts.Stepped {
		q.up.nudge = make(chan struct{}, 1)
	}
	q.maxSGE = max(int(q.cap.MaxSendSGE), 1)
	d.SetRetainSends(true)
	q.initRecvLog()
	q.injWRs = make([]verbs.SendWR, 0, q.cap.MaxSendWR)
	q.injSGE = make([]verbs.SGE, q.maxSGE)
	q.sets = make([]*bkSet, len(c.bks))
	for i, bd := range c.bks {
		psn := (q.qpn*2654435761 + uint32(i)*psnStride) & 0xffffff
		q.sets[i] = &bkSet{dev: bd, psn: psn}
	}
	scq.addQP(&scq.qps, q.qpn, q)
	if rcq != scq {
		rcq.addQP(&rcq.qps, q.qpn, q)
	}
	c.record("create_qp", func(bd *backupDev) error { return q.createBackup(q.sets[bd.idx]) })
	c.live.add(q)
	if q.injArmedFor() {
		// Armed before q was listed: its posts are counted from the first (injgate.go).
		// After the add, so that an arm after this check finds q in the list.
		q.mu.Mutex.Lock()
		q.injClosed = true
		q.sendGate.state.Store(gateClosed)
		q.mu.Mutex.Unlock()
	}
	q.mach.track.wake() // the status file lists it
	return q, nil
}

func (q *QP) createBackup(bs *bkSet) error {
	c := q.c
	i := bs.dev.idx
	if bs.qp.Load() == nil {
		b, err := q.makeBackupQP(bs)
		if err != nil {
			return err
		}
		q.scq.addQP(&q.scq.bqps[i], b.QPN(), q)
		if q.rcq != q.scq {
			q.rcq.addQP(&q.rcq.bqps[i], b.QPN(), q)
		}
		bs.qp.Store(b)
	}
	b := bs.qp.Load()
	e := qpEntry{defGID: c.gid, defQPN: q.qpn,
		backup: verbs.Endpoint{GID: bs.dev.gid, QPN: b.QPN(), PSN: bs.psn}, ctlID: c.ctlID}
	v := e.marshal()
	ctx, cancel := c.kvCtx()
	defer cancel()
	if err := c.opts.KV.Put(ctx, c.qpKeyN(i, c.gid, q.qpn), v); err != nil {
		return fmt.Errorf("%w: %w", errNotYet, err)
	}
	return nil
}

// makeBackupQP creates a backup data QP for set bs (in INIT), unregistered.
func (q *QP) makeBackupQP(bs *bkSet) (*provider.QP, error) {
	i := bs.dev.idx
	bpd, scq, rcq := q.pd.bk[i].Load(), q.scq.bk[i].Load(), q.rcq.bk[i].Load()
	if bpd == nil || scq == nil || rcq == nil {
		return nil, fmt.Errorf("%w: backup PD or CQ missing", ErrBackupNotReady)
	}
	cp := q.cap
	// Send slots for the reposted WRs plus the fillers (at most one per receive) and
	// SHIFT's fence WR; receives: the stale application RECVs a recovery leaves until
	// the next fallback's fillers consume them, plus the reposted ones.
	cp.MaxSendWR = cp.MaxSendWR + cp.MaxRecvWR + 2
	cp.MaxRecvWR = 2*cp.MaxRecvWR + 2
	b, err := as[*provider.QP](bpd.CreateQP(verbs.QPInitAttr{SendCQ: scq, RecvCQ: rcq, Cap: cp, SigAll: q.sigAll}))
	if err != nil {
		return nil, err
	}
	ca := verbs.ConnectAttr{Port: q.c.opts.Port, GIDIndex: bs.dev.gidIndex}
	if err := verbs.ToInit(b, ca); err != nil {
		b.Destroy()
		return nil, err
	}
	return b, nil
}

// sendReserve and recvReserve are the default QP's slots for SHIFT's own WRs: at most a
// probe or the recovery notification, and a drain marker, outstanding at once on the send
// queue (one spare); the control RECV on the receive queue (one spare).
const (
	sendReserve = 3
	recvReserve = 2
)

// QPN is the default QP's number, the one the application exchanges with its peer.
func (q *QP) QPN() uint32 { return q.qpn }

// Cap is the default QP's capabilities.
func (q *QP) Cap() verbs.QPCap { return q.cap }

// Default is the default provider QP.
func (q *QP) Default() *provider.QP { return q.def }

// Backup is the provider QP of the backup set in use (nil until the shadow goroutine
// created it).
func (q *QP) Backup() *provider.QP { return q.cs().qp.Load() }

// BackupIndex is the index, in the backup chain, of the backup set in use (or next to use).
func (q *QP) BackupIndex() int { return int(q.cur.Load()) }

// SendState is the send side's state (one atomic load).
func (q *QP) SendState() SendState { return q.mach.sendState() }

// RecvState is the receive side's state.
func (q *QP) RecvState() RecvState { return q.mach.recvState() }

// RoundState is the QP's part in a reset round.
func (q *QP) RoundState() RoundState { return q.mach.roundState() }

// PinState says who switched the QP to the backup on purpose.
func (q *QP) PinState() PinState { return q.mach.pinState() }

// BackupReady reports whether the backup QP in use is connected to the peer's backup QP.
func (q *QP) BackupReady() bool { return q.cs().ready.Load() }

// BackupsReady reports whether the backup QPs of every backup device are connected.
func (q *QP) BackupsReady() bool {
	for _, bs := range q.sets {
		if !bs.ready.Load() {
			return false
		}
	}
	return true
}

// FallbackLatency is the time from the first error completion polled on the default QP to
// the first successful application completion from the backup QP (0 if either is missing).
func (q *QP) FallbackLatency() time.Duration {
	e, o := q.tErr.Load(), q.tOK.Load()
	if e == 0 || o == 0 || o < e {
		return 0
	}
	return time.Duration(o - e)
}

// roundDeviceTime adds the time since t0, spent inside a device call (a post, a command) of
// the round under way, to *d (tPost, tCmd), until the round's last WR is reposted: what
// later rounds spend (the reset rounds after a fallback) is not the measured round's.
func (q *QP) roundDeviceTime(d *atomic.Int64, t0 time.Time) {
	if q.tPosted.Load() == 0 {
		d.Add(int64(q.c.now().Sub(t0)))
	}
}

// FallbackPhases splits FallbackLatency: error → notification posted (stop, drain, checks,
// receives moved), → peer's counter received and sends reposted, → first completion.
func (q *QP) FallbackPhases() (prepare, handshake, complete time.Duration) {
	e, p, r, o := q.tErr.Load(), q.tPrep.Load(), q.tRepost.Load(), q.tOK.Load()
	if e == 0 || p == 0 || r == 0 || o == 0 {
		return 0, 0, 0
	}
	return time.Duration(p - e), time.Duration(r - p), time.Duration(o - r)
}

// Err is why the QP failed (nil unless SendState is Failed).
func (q *QP) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failErr
}

// queryMask is what SHIFT keeps of the default QP at RTR and RTS to reset and reconnect it.
const queryMask = verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN |
	verbs.QPAttrRQPSN | verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer | verbs.QPAttrSQPSN |
	verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRdAtomic

// Modify is ibv_modify_qp on the default QP (the backup QP is in INIT from its creation). It
// keeps what SHIFT needs to connect the backup QP and to reset and reconnect the default one:
// on INIT the port, P_Key index and access flags; on RTR the peer (destination QPN, its first
// PSN, GID and LID) and the path, then the default QP's attributes queried (paper §4.2) and
// the shadow connect recorded: the backup QP is connected to the backup QP the peer
// published for this connection, once it is in the KV store; on RTS the timeouts, retry
// counts and first send PSN, and the attributes queried again. A Modify to ERR, or to RESET
// once the QP was connected, stops the QP as without SHIFT and ends SHIFT's involvement with
// it (appstop.go).
func (q *QP) Modify(a *verbs.QPAttr, mask verbs.QPAttrMask) error {
	if mask&verbs.QPAttrState != 0 && q.stopsByApp(a.State) {
		return q.stopByApp(a, mask)
	}
	da := a
	if mask&verbs.QPAttrAccessFlags != 0 && q.defGen.Load() > 0 {
		// A default QP SHIFT has reset answers the peer's probes (resetAccess).
		c := *a
		c.AccessFlags = resetAccess(a.AccessFlags)
		da = &c
	}
	if err := q.def.Modify(da, mask); err != nil {
		return fmt.Errorf("failover: modify_qp: %w", err)
	}
	if mask&verbs.QPAttrAccessFlags != 0 {
		q.mu.Lock()
		q.attr.Access = a.AccessFlags
		q.mu.Unlock()
	}
	if mask&verbs.QPAttrState == 0 {
		return nil
	}
	q.appState.Store(uint32(a.State))
	switch a.State {
	case verbs.QPStateInit:
		q.mu.Lock()
		if mask&verbs.QPAttrPort != 0 {
			q.attr.Port = a.Port
		}
		if mask&verbs.QPAttrPkeyIndex != 0 {
			q.attr.PKeyIndex = a.PkeyIndex
		}
		q.mu.Unlock()
	case verbs.QPStateRTR:
		rtr, err := q.def.Query(queryMask)
		if err != nil {
			return fmt.Errorf("failover: query_qp at RTR: %w", err)
		}
		q.mu.Lock()
		q.attr.PathMTU, q.attr.MaxDestRdAtomic, q.attr.MinRNRTimer = rtr.PathMTU, rtr.MaxDestRdAtomic, rtr.MinRNRTimer
		q.attr.GIDIndex, q.attr.HopLimit, q.attr.TrafficClass = rtr.AV.SGIDIndex, rtr.AV.HopLimit, rtr.AV.TrafficClass
		q.attr.FlowLabel, q.attr.SL = rtr.AV.FlowLabel, rtr.AV.SL
		q.remote = verbs.Endpoint{QPN: rtr.DestQPN, PSN: rtr.RQPSN, GID: rtr.AV.DGID, LID: rtr.AV.DLID}
		q.rtrAttr = rtr
		remote := q.remote
		q.mu.Unlock()
		q.connectOps = q.c.record("connect_qp", func(bd *backupDev) error { return q.connectBackup(q.sets[bd.idx], remote) })
	case verbs.QPStateRTS:
		rts, err := q.def.Query(queryMask)
		if err != nil {
			return fmt.Errorf("failover: query_qp at RTS: %w", err)
		}
		q.mu.Lock()
		q.attr.Timeout, q.attr.RetryCnt, q.attr.RNRRetry = rts.Timeout, rts.RetryCnt, rts.RNRRetry
		q.attr.MaxRdAtomic = rts.MaxRdAtomic
		q.local.PSN, q.rtsAttr = rts.SQPSN, rts
		q.mu.Unlock()
	}
	return nil
}

// Query is ibv_query_qp on the default QP, with the application's view of the state: while
// SHIFT keeps the QP running (on a backup, its default QP in ERR or reconnecting for a probe,
// or failed on a NIC SHIFT has not seen fail yet) the state the application last moved it
// to; once SHIFT gave it up (Failed, the application's error, its Modify to ERR) the default
// QP's. The query leaves the state the provider's data path and SHIFT's transitions read as
// SHIFT set it (QueryOnly): SHIFT learns of a failure from completions and events, and a
// refresh with the ERR the application happened to read would change under a transition
// what it decides on (a probe's success needs RTS, a recovery a connected default QP).
func (q *QP) Query(mask verbs.QPAttrMask) (verbs.QPAttr, error) {
	a, err := q.def.QueryOnly(mask)
	if err != nil {
		return a, err
	}
	if mask&verbs.QPAttrAccessFlags != 0 {
		q.mu.Lock()
		a.AccessFlags = q.attr.Access // the application's, without resetAccess's addition
		q.mu.Unlock()
	}
	if mask&verbs.QPAttrState != 0 {
		app := verbs.QPState(q.appState.Load())
		runs := q.mach.sendState() != SendFailed && q.mach.recvState() != RecvFailed
		if runs && app != verbs.QPStateReset || app == verbs.QPStateErr {
			// The application's ERR stands even where the default QP could not be moved
			// (a dead device answers EIO: appstop.go).
			a.State = app
		}
	}
	return a, nil
}

// QueriedAttrs returns the default QP's attributes queried at RTR and RTS.
func (q *QP) QueriedAttrs() (rtr, rts verbs.QPAttr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rtrAttr, q.rtsAttr
}

// connectBackup looks up the peer's backup QP and connects ours to it; it asks to be retried
// while the peer has not published it.
func (q *QP) connectBackup(bs *bkSet, remote verbs.Endpoint) error {
	c := q.c
	b := bs.qp.Load()
	if b == nil {
		return fmt.Errorf("%w: backup QP missing", ErrBackupNotReady)
	}
	ctx, cancel := c.kvCtx()
	defer cancel()
	v, err := c.opts.KV.Get(ctx, c.qpKeyN(bs.dev.idx, remote.GID, remote.QPN))
	if err != nil {
		if errors.Is(err, kv.ErrNotFound) || errors.Is(err, kv.ErrUnavailable) {
			return fmt.Errorf("%w: %w", errNotYet, err)
		}
		return err
	}
	e, err := parseQPEntry(v, remote.GID, remote.QPN)
	if err != nil {
		return err
	}
	q.mu.Lock()
	ba := q.attr
	q.mu.Unlock()
	// The control endpoint towards the peer's context first (created, published and
	// connected with the first QP towards it): until the peer's is in the store, this verb
	// is retried with the data QP still in INIT.
	ep, err := bs.dev.connectEndpoint(e.ctlID, e.backup.GID, ba)
	if err != nil {
		return err
	}
	ba.Port, ba.GIDIndex = c.opts.Port, bs.dev.gidIndex
	if b.State() == verbs.QPStateInit {
		// The backup QP went to INIT when it was made, before the application's INIT said
		// what the peer may do: its remote access is set here, as the default QP's after a
		// reset (resetAccess: SHIFT's fence WR is a zero-length RDMA WRITE too).
		attr, mask := ba.RTRAttr(e.backup)
		attr.AccessFlags, mask = resetAccess(ba.Access), mask|verbs.QPAttrAccessFlags
		if err := b.Modify(&attr, mask); err != nil {
			return err
		}
	}
	if b.State() == verbs.QPStateRTR {
		if err := verbs.ToRTS(b, ba, bs.psn); err != nil {
			return err
		}
	}
	// The peer's MR entries, before a fallback onto this set can need them (rkcache.go).
	bs.dev.prefetchPeer(ctx, remote.GID)
	bs.peerQPN.Store(remote.QPN)
	bs.ep.Store(ep)
	bs.ready.Store(true)
	return nil
}

// Destroy is ibv_destroy_qp on both devices.
func (q *QP) Destroy() error {
	q.c.live.remove(q) // first: a switch request no longer finds it
	q.mach.track.wake()
	q.mu.Lock()
	if q.hsTimer != nil {
		q.hsTimer.Stop()
	}
	q.destroyed = true
	// A probe waiting for its completion ends now (probeWait): it would poll the CQs, which
	// the application may destroy next, until the context closed.
	q.probeRes.CompareAndSwap(0, 2)
	// A destroyed QP no longer keeps its CQs off the fast path (its gates stay closed).
	q.unmarkSlowLocked()
	q.mu.Unlock()
	h := q.def.UserHandle()
	release := q.holdCQRings()
	err := q.def.Destroy()
	release()
	if err != nil {
		return fmt.Errorf("failover: destroy_qp: %w", err)
	}
	q.c.async.withdraw(h) // as the kernel withdraws a destroyed QP's unread events
	q.scq.addQP(&q.scq.qps, q.qpn, nil)
	q.rcq.addQP(&q.rcq.qps, q.qpn, nil)
	for i, op := range q.connectOps {
		q.c.bks[i].cancel(op)
	}
	c := q.c
	c.record("destroy_qp", func(bd *backupDev) error {
		bs, i := q.sets[bd.idx], bd.idx
		b := bs.qp.Swap(nil)
		if b == nil {
			return nil
		}
		bs.ready.Store(false)
		q.scq.addQP(&q.scq.bqps[i], b.QPN(), nil)
		q.rcq.addQP(&q.rcq.bqps[i], b.QPN(), nil)
		// The control endpoint is the context's: it stays for the other QPs towards
		// the peer, and for the next ones (ctlep.go).
		bs.ep.Store(nil)
		ctx, cancel := c.kvCtx()
		defer cancel()
		_ = c.opts.KV.Delete(ctx, c.qpKeyGen(i, c.gid, q.qpn, bs.gen.Load()))
		return b.Destroy()
	})
	return nil
}

// popKind takes the kind of the oldest WR still recorded in fifo (one of the QP's four
// posting-order records: backup/default × send/recv); an empty record means the application's.
func (q *QP) popKind(fifo *[]uint8) uint8 {
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	if len(*fifo) == 0 {
		return kindApp
	}
	// Popped by a copy rather than by reslicing: the FIFO keeps its whole array, so that
	// pushes on the data path stop allocating once it reached its depth (a few bytes per
	// outstanding signaled WR).
	f := *fifo
	k := f[0]
	*fifo = f[:copy(f, f[1:])]
	return k
}

// popHeldOp is the opcode of the WR the completion of a kindHeld WQE stands for.
func (q *QP) popHeldOp(bs *bkSet) verbs.WCOpcode {
	q.fifoMu.Lock()
	defer q.fifoMu.Unlock()
	if len(bs.heldOps) == 0 {
		return verbs.WCRDMAWrite
	}
	op := bs.heldOps[0]
	bs.heldOps = bs.heldOps[:copy(bs.heldOps, bs.heldOps[1:])]
	return op
}

func twoSided(op verbs.WROpcode) bool {
	return op == verbs.WRSend || op == verbs.WRSendWithImm || op == verbs.WRRDMAWriteWithImm
}
