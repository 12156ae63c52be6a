package failover

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Shared control QP pairs (issue 12 §2). SHIFT's fallback notifications travel on a control
// QP pair of their own on each backup device, so that they never consume an application
// receive. One pair serves every QP between two contexts on one backup device: a
// ctlEndpoint per (local context, backup device, peer context), created on the device's
// shadow goroutine when the first QP towards that peer context connects its backup set, and
// destroyed with the context, or when a re-armed pair replaces it (rearm.go).
//
// Keying. Every context draws a random 64-bit control id at Open; each QP entry in the KV
// store names its owner's (qpEntry.ctlID), so two peer processes on one host (same GIDs)
// are two peers. A context publishes, per backup device i and peer id P, the control entry
// ctl/<own id>/<P>/<i> (its control QP's GID, QPN and PSN) and connects its control QP to
// the peer's ctl/<P>/<own id>/<i>; the QP's backup set is ready once both its data QP and
// the endpoint are connected.
//
// Messages (ctlmsg.go, version 3) name the receiver's default QPN and the sender's. The
// receiving endpoint acts on a message only for a live QP of its context with that QPN
// whose backup set on this device uses this very endpoint and is connected to the sender's
// QP; anything else (another context's QP, a destroyed or reconnected one, a forged or
// corrupt message) is dropped and counted.
//
// Depth. In a fallback storm every QP between the two contexts sends one message (its
// notification or its reply) per round: ctlRecvDepth receive slots absorb that many at
// once; beyond them the sender's NIC meets an RNR NAK and retries without limit (the
// control QPs use rnr_retry 7), while each completed receive is reposted before its
// message is handled, so a storm is slowed, never lost. On the send side, messages beyond
// ctlSendDepth outstanding wait in a software backlog posted as completions come, never a
// failed post.
//
// Failure. An error completion on the control QP (a SEND that exhausted its retries, or the
// flushes that follow) means the peer cannot be reached on this device: the endpoint is
// marked failed, and every QP whose backup set in use relies on it is treated as if its
// own backup QP had failed (failBackup: the next backup, where messages travel on that
// device's endpoint, or the error to the application). A QP that does not use the set at
// that moment moves on at its next fallback (roundLocked), without a round of its own. Once
// the device's link is up again both sides replace the pair with one of the next
// generation (rearm.go).
//
// Variables, so that a test can make a storm outgrow them.
var (
	ctlRecvDepth = 256
	ctlSendDepth = 64
)

// ctlEndpoint is one shared control QP of a backup device towards one peer context.
type ctlEndpoint struct {
	dev  *backupDev
	peer uint64 // the peer context's control id
	qp   *provider.QP
	cq   *provider.CQ
	buf  *provider.Buffer // ctlRecvDepth receive slots of ctlMsgSize bytes
	mr   *provider.MR
	psn  uint32
	// sendDepth and recvDepth are ctlSendDepth and ctlRecvDepth when it was created.
	sendDepth, recvDepth int
	// published: the control entry is in the KV store; connected: the QP is in RTS towards
	// the peer's control QP (the shadow goroutine); failed: an error completion came.
	published, connected, failed atomic.Bool
	peerGID                      [16]byte // shadow goroutine
	// attr: the connection attributes it was connected with (shadow goroutine); gen: its
	// generation, 0 for the first pair towards the peer, one more for each re-arm
	// (rearm.go), named by its control entry's key.
	attr verbs.ConnectAttr
	gen  uint32
	// closed: released with the context (mu); nothing is posted any more.
	closed bool

	mu sync.Mutex // the QP's posts and the CQ's polls
	// inflight holds the messages posted without completion, in post order: what is lost
	// if the endpoint fails or is replaced (takeLostLocked).
	inflight []ctlMsg
	backlog  []ctlMsg // messages waiting for a send slot
	send     [ctlMsgSize]byte
	scratch  []verbs.WC

	sent, received, dropped, backlogged atomic.Uint64
	wd                                  wdCtl // the watchdog's watch (watchdog_ctl.go)
}

// newCtlID draws a context's control id: random, never zero.
func newCtlID() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("failover: control id: %w", err)
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
}

func (c *Context) ctlKey(idx int, from, to uint64) string {
	return fmt.Sprintf("shift/%s/ctl/%016x/%016x/%d", c.opts.Job, from, to, idx)
}

// ctlKeyGen is the key of a control entry of generation gen: ctlKey for the first pair, a
// suffix /g<gen> for a re-armed one (rearm.go).
func (c *Context) ctlKeyGen(idx int, from, to uint64, gen uint32) string {
	return c.ctlKey(idx, from, to) + genSuffix(gen)
}

// endpoint returns b's control endpoint towards the peer context peer, creating it (INIT,
// its receives posted) on first use. Shadow goroutine.
func (b *backupDev) endpoint(peer uint64) (*ctlEndpoint, error) {
	b.epMu.Lock()
	defer b.epMu.Unlock()
	if ep := b.eps[peer]; ep != nil {
		return ep, nil
	}
	ep, err := b.newEndpointLocked(peer, 0)
	if err != nil {
		return nil, err
	}
	b.eps[peer] = ep
	return ep, nil
}

// newEndpointLocked creates a control endpoint of generation gen towards the peer context
// peer (INIT, its receives posted, its CQ armed and dispatched by the event goroutine);
// the caller files it. b.epMu held; shadow goroutine.
func (b *backupDev) newEndpointLocked(peer uint64, gen uint32) (*ctlEndpoint, error) {
	if b.ctlPD == nil {
		pd, err := as[*provider.PD](b.ctx.AllocPD())
		if err != nil {
			return nil, fmt.Errorf("failover: control PD: %w", err)
		}
		b.ctlPD = pd
	}
	ep := &ctlEndpoint{dev: b, peer: peer, gen: gen, scratch: make([]verbs.WC, 64),
		psn: uint32(mix64(b.c.ctlID^peer^uint64(b.idx)^uint64(gen)<<32)) & psnMask, sendDepth: ctlSendDepth, recvDepth: ctlRecvDepth}
	var err error
	if ep.cq, err = as[*provider.CQ](b.ctx.CreateCQ(verbs.CQInitAttr{CQE: ep.sendDepth + ep.recvDepth, Channel: b.ch})); err != nil {
		return nil, fmt.Errorf("failover: control CQ: %w", err)
	}
	if ep.qp, err = as[*provider.QP](b.ctlPD.CreateQP(verbs.QPInitAttr{SendCQ: ep.cq, RecvCQ: ep.cq,
		Cap: verbs.QPCap{MaxSendWR: uint32(ep.sendDepth), MaxRecvWR: uint32(ep.recvDepth), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: ctlMsgSize}})); err != nil {
		_ = ep.cq.Destroy()
		return nil, fmt.Errorf("failover: control QP: %w", err)
	}
	if err := ep.setup(); err != nil {
		_ = ep.release()
		return nil, err
	}
	b.cqMu.Lock()
	b.ctlCQs[ep.cq] = ep
	b.cqMu.Unlock()
	// Under ep.mu: the event goroutine may already poll the CQ (onEvent), and arming reads
	// the consumer index the poller writes.
	ep.mu.Lock()
	err = ep.cq.Arm(false)
	ep.mu.Unlock()
	if err != nil {
		b.cqMu.Lock()
		delete(b.ctlCQs, ep.cq)
		b.cqMu.Unlock()
		_ = ep.release()
		return nil, fmt.Errorf("failover: control CQ: arm: %w", err)
	}
	return ep, nil
}

// setup moves the new control QP to INIT and posts a receive into every slot.
func (ep *ctlEndpoint) setup() error {
	b := ep.dev
	if err := verbs.ToInit(ep.qp, verbs.ConnectAttr{Port: b.c.opts.Port, GIDIndex: b.gidIndex}); err != nil {
		return fmt.Errorf("failover: control QP: %w", err)
	}
	buf, err := provider.NewBuffer(ep.recvDepth * ctlMsgSize)
	if err != nil {
		return err
	}
	ep.buf = buf
	if ep.mr, err = as[*provider.MR](b.ctlPD.RegMR(buf.Bytes(), verbs.AccessLocalWrite)); err != nil {
		return fmt.Errorf("failover: control buffer: %w", err)
	}
	recvs := make([]verbs.RecvWR, ep.recvDepth)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{WRID: ctlRecvBase + uint64(i), SGL: []verbs.SGE{ep.mr.SGE(i*ctlMsgSize, ctlMsgSize)}}
	}
	return ep.qp.PostRecv(recvs)
}

// release destroys the endpoint's verbs objects (the QP before its CQ, the MR before its
// buffer).
func (ep *ctlEndpoint) release() error {
	var errs []error
	if ep.qp != nil {
		errs = append(errs, ep.qp.Destroy())
	}
	if ep.mr != nil {
		errs = append(errs, ep.mr.Dereg())
	}
	if ep.buf != nil {
		ep.buf.Free()
	}
	if ep.cq != nil {
		errs = append(errs, ep.cq.Destroy())
	}
	return errors.Join(errs...)
}

// connectEndpoint returns b's endpoint towards the peer context peer (control id, backup GID
// of its QP entry), published and connected; errNotYet while the peer's control entry is not
// in the store. a is the connection's attributes (the first QP's towards that peer), with
// an unlimited RNR retry. Shadow goroutine.
func (b *backupDev) connectEndpoint(peer uint64, gid [16]byte, a verbs.ConnectAttr) (*ctlEndpoint, error) {
	ep, err := b.endpoint(peer)
	if err != nil {
		return nil, err
	}
	c := b.c
	ctx, cancel := c.kvCtx()
	defer cancel()
	if !ep.published.Load() {
		e := ctlEntry{from: c.ctlID, to: peer, ep: verbs.Endpoint{GID: b.gid, QPN: ep.qp.QPN(), PSN: ep.psn}}
		if err := c.opts.KV.Put(ctx, c.ctlKeyGen(b.idx, c.ctlID, peer, ep.gen), e.marshal()); err != nil {
			return nil, fmt.Errorf("%w: %w", errNotYet, err)
		}
		ep.published.Store(true)
	}
	if ep.connected.Load() {
		if ep.peerGID != gid {
			return nil, fmt.Errorf("failover: QP entry of context %#x: backup GID %x, its control QP's %x: %w", peer, gid, ep.peerGID, ErrBadEntry)
		}
		return ep, nil
	}
	v, err := c.opts.KV.Get(ctx, c.ctlKeyGen(b.idx, peer, c.ctlID, ep.gen))
	if err != nil {
		if errors.Is(err, kv.ErrNotFound) || errors.Is(err, kv.ErrUnavailable) {
			return nil, fmt.Errorf("%w: %w", errNotYet, err)
		}
		return nil, err
	}
	e, err := parseCtlEntry(v, peer, c.ctlID, gid)
	if err != nil {
		return nil, err
	}
	if err := ep.connectTo(e, a, gid); err != nil {
		return nil, err
	}
	return ep, nil
}

// connectTo brings the endpoint's QP to RTS towards the peer's control QP of entry e (its
// backup GID gid), with the connection attributes a. Shadow goroutine.
func (ep *ctlEndpoint) connectTo(e ctlEntry, a verbs.ConnectAttr, gid [16]byte) error {
	b, c := ep.dev, ep.dev.c
	a.Port, a.GIDIndex = c.opts.Port, b.gidIndex
	a.RNRRetry = 7 // a storm beyond the receive slots waits for them: never an RNR error
	a.MinRNRTimer = max(a.MinRNRTimer, 1)
	if a.Timeout == 0 {
		// The connection's RTS attributes are not known yet (the shadow connect runs from
		// RTR): a lost peer must still end in an error completion, never an endless wait.
		a.RetryCnt = 7
	}
	if t := ctlTimeout(c.opts.HandshakeTimeout); a.Timeout == 0 || a.Timeout > t {
		a.Timeout = t
	}
	if ep.qp.State() == verbs.QPStateInit {
		if err := verbs.ToRTR(ep.qp, a, e.ep); err != nil {
			return err
		}
	}
	if ep.qp.State() == verbs.QPStateRTR {
		if err := verbs.ToRTS(ep.qp, a, ep.psn); err != nil {
			return err
		}
	}
	ep.peerGID, ep.attr = gid, a
	ep.connected.Store(true)
	return nil
}

// ctlTimeout is the longest local ACK timeout a control endpoint takes: the largest exponent
// up to 14 (67 ms a try, 537 ms of reach with 7 retries) whose reach leaves the control
// watchdog, which waits twice the reach (watchdog_ctl.go), inside half the peer's
// HandshakeTimeout. The peer sends its notification again halfway through its wait; a NIC
// of ours that hung as that one arrived must be found, and the QP moved to the next backup,
// before the peer gives up (found by internal/sim: failover seed 302807, a receive-only
// QP's endpoint, connected from RTR without the connection's timeout, with 537 ms of reach
// against a HandshakeTimeout of 2 s). It also bounds the endpoint of an application whose
// QPs use a longer timeout than that (NCCL's exponent 20, 4.3 s a try), whose control
// watchdog would otherwise outlast any HandshakeTimeout; with the default 10 s it is 14.
func ctlTimeout(handshake time.Duration) uint8 {
	t := uint8(14)
	for t > 10 && 4*retryReach(verbs.ConnectAttr{Timeout: t, RetryCnt: 7}) > handshake {
		t--
	}
	return t
}

// errCtlFailed: the endpoint failed; the message was not sent. errCtlClosed: the context
// is being closed.
var (
	errCtlFailed = errors.New("failover: control QP failed")
	errCtlClosed = errors.New("failover: control QP closed with the context")
)

// post sends m, or keeps it for a send slot; ep.mu held.
func (ep *ctlEndpoint) postLocked(m ctlMsg) error {
	if len(ep.inflight) >= ep.sendDepth {
		ep.backlog = append(ep.backlog, m)
		ep.backlogged.Add(1)
		return nil
	}
	// Inline: the post copies the bytes into the WQE.
	m.put(ep.send[:])
	if err := ep.qp.PostSend([]verbs.SendWR{{WRID: ctrlWRID, Opcode: verbs.WRSend,
		Flags: verbs.SendSignaled | verbs.SendInline, SGL: []verbs.SGE{{Addr: sliceAddr(ep.send[:]), Length: ctlMsgSize}}}}); err != nil {
		return err
	}
	ep.inflight = append(ep.inflight, m)
	ep.sent.Add(1)
	return nil
}

// sendMsg posts m (or queues it behind the messages waiting for a send slot).
func (ep *ctlEndpoint) sendMsg(m ctlMsg) error {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.closed {
		return errCtlClosed
	}
	if ep.failed.Load() {
		return errCtlFailed
	}
	if len(ep.backlog) > 0 {
		ep.backlog = append(ep.backlog, m)
		ep.backlogged.Add(1)
		return nil
	}
	return ep.postLocked(m)
}

// onEvent runs on the backup device's event goroutine when the endpoint's CQ has
// completions: receives are reposted and their messages dispatched to their QPs, send
// completions free slots for the backlog, and an error completion fails the endpoint.
func (ep *ctlEndpoint) onEvent() {
	var msgs []ctlMsg
	var failWC *verbs.WC
	var lost []ctlMsg
	ep.mu.Lock()
	if ep.closed {
		ep.mu.Unlock() // replaced by a re-armed pair (rearm.go) after the event was taken
		return
	}
	_ = ep.cq.Arm(false) // before polling: a completion after the poll raises a new event
	for {
		n, err := ep.cq.Poll(ep.scratch)
		for k := range ep.scratch[:n] {
			w := ep.scratch[k]
			if w.Status != verbs.WCSuccess {
				if !ep.failed.Swap(true) {
					failWC = &w
					lost = ep.takeLostLocked() // lost with the path: their QPs move on (failAll)
				}
				continue
			}
			if w.Opcode&verbs.WCRecv == 0 {
				if len(ep.inflight) > 0 { // sends complete in post order
					ep.inflight = ep.inflight[1:]
				}
				continue
			}
			slot := w.WRID - ctlRecvBase
			if w.WRID < ctlRecvBase || slot >= uint64(ep.recvDepth) {
				continue // not one of our receives
			}
			off := int(slot) * ctlMsgSize
			// Copy the message out, then give the slot back before handling it.
			var raw [ctlMsgSize]byte
			copy(raw[:], ep.buf.Bytes()[off:off+ctlMsgSize])
			_ = ep.qp.PostRecv([]verbs.RecvWR{{WRID: w.WRID, SGL: []verbs.SGE{ep.mr.SGE(off, ctlMsgSize)}}})
			if w.ByteLen != ctlMsgSize {
				ep.dropped.Add(1)
				continue
			}
			m, err := parseCtlMsg(raw[:])
			if err != nil {
				ep.dropped.Add(1) // no notification: the peer's handshake times out
				continue
			}
			ep.received.Add(1)
			msgs = append(msgs, m)
		}
		if err != nil || n < len(ep.scratch) {
			break
		}
	}
	for !ep.failed.Load() && len(ep.backlog) > 0 && len(ep.inflight) < ep.sendDepth {
		m := ep.backlog[0]
		ep.backlog = ep.backlog[1:]
		if err := ep.postLocked(m); err != nil {
			break // the QP is in error: its completions fail the endpoint
		}
	}
	ep.mu.Unlock()
	for _, m := range msgs {
		ep.deliver(m)
	}
	if failWC != nil {
		ep.failAll(*failWC, lost)
		ep.dev.kickRearm() // re-armed once the device's link is up (rearm.go)
	}
}

// deliver hands m to the QP it names, if that QP is a live QP of the context whose backup set
// on this device uses this endpoint and is connected to the sender's QP; otherwise m is
// dropped. A notification for a QP the context no longer has (the application destroyed it)
// is answered with a refusal, as a failed QP answers (notifyRefusalLocked): the sender's QP
// fails now instead of at its HandshakeTimeout (found by internal/sim: the peer of a QP the
// application stopped and destroyed waited its 2 s, stop.go).
func (ep *ctlEndpoint) deliver(m ctlMsg) {
	i := ep.dev.idx
	if d := ep.dev.c.dropCtl.Load(); d != nil && (*d)(ep, m) {
		ep.dropped.Add(1)
		return
	}
	q := ep.dev.c.live.lookup(m.dst)
	if q == nil {
		ep.dropped.Add(1)
		if !m.reply && !m.refused && !m.neverSent {
			_ = ep.sendMsg(ctlMsg{refused: true, reply: true, dst: m.src, src: m.dst})
		}
		return
	}
	bs := q.sets[i]
	if bs.ep.Load() != ep || bs.peerQPN.Load() != m.src {
		ep.dropped.Add(1)
		return
	}
	q.tPoll.Store(ep.dev.c.now().UnixNano())
	ep.dev.c.eng.doNow(func() { q.onControl(m, i) })
}

// failAll tells every QP that uses the failed endpoint (ctlFailed), and sends the refusals
// lost with it again (resendRefusals).
func (ep *ctlEndpoint) failAll(wc verbs.WC, lost []ctlMsg) {
	c, i := ep.dev.c, ep.dev.idx
	for _, q := range c.live.all() {
		if q.sets[i].ep.Load() == ep {
			c.eng.do(func() { q.ctlFailed(i, wc) })
		}
	}
	ep.dev.resendRefusals(ep, lost)
}

// takeLostLocked returns the messages in flight and those waiting for a send slot, and
// forgets them (ep.mu held): nothing will deliver or fail them any more.
func (ep *ctlEndpoint) takeLostLocked() []ctlMsg {
	lost := append(ep.inflight, ep.backlog...)
	ep.inflight, ep.backlog = nil, nil
	return lost
}

// resendRefusals sends the refusals among lost (messages lost with endpoint old) again on
// another endpoint towards the same peer context, on any backup device: the first whose pair
// is connected and up; a lost message of a QP that failed since (its fallback refused, the
// application's error or Modify to ERR) or that the context no longer has is answered so too,
// by a refusal in its stead. Neither a failed nor a destroyed QP chains, so no round of this
// side moves on for such a message, and the peer, waiting for the answer to its
// notification, would wait for its HandshakeTimeout (found by internal/sim, failover seeds
// 90, 5154, 6014 and 7342 with two backups: the message's backup link went down for longer
// than the RC reach). The peer acts on a refusal whichever set it arrives on (onControl).
func (b *backupDev) resendRefusals(old *ctlEndpoint, lost []ctlMsg) {
	for _, m := range lost {
		if !m.refused {
			if q := b.c.live.lookup(m.src); q != nil && !q.failedSide() {
				continue // its QP moves on (ctlFailed)
			}
			m = ctlMsg{refused: true, reply: true, dst: m.dst, src: m.src}
		}
		for _, d := range b.c.bks {
			if d.dead.Load() {
				continue
			}
			d.epMu.Lock()
			ep := d.eps[old.peer]
			d.epMu.Unlock()
			if ep == nil || ep == old || !ep.connected.Load() || ep.failed.Load() {
				continue
			}
			if ep.sendMsg(m) == nil {
				b.c.refusalsResent.Add(1)
				break
			}
		}
	}
}

// ctlFailed handles the failure of the endpoint of q's backup set i: when q uses that set
// (a round under way, or its traffic there), as a failure of the set itself (failBackup);
// otherwise its next fallback moves on (roundLocked).
func (q *QP) ctlFailed(i int, wc verbs.WC) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if int(q.cur.Load()) != i || q.destroyed {
		return
	}
	if q.mach.sendState() == SendDefault && q.mach.recvState() == RecvDefault && q.mach.roundState() == RoundIdle {
		return
	}
	bs := q.sets[i]
	q.fifoMu.Lock()
	skip := bs.dead || bs.gaveUp || bs.failQueued
	bs.failQueued = true
	q.fifoMu.Unlock()
	if !skip {
		q.failBackupLocked(bkFail{q: q, wc: wc, set: i})
	}
}

// closeEndpoints destroys b's control endpoints, those a re-arm is building included, and
// withdraws their entries (Context.Close, once the device's goroutines stopped).
func (b *backupDev) closeEndpoints() error {
	b.epMu.Lock()
	defer b.epMu.Unlock()
	var errs []error
	for _, m := range []map[uint64]*ctlEndpoint{b.eps, b.rearm.next} {
		for peer, ep := range m {
			_, err := b.closeEndpoint(ep)
			errs = append(errs, err)
			delete(m, peer)
		}
	}
	if b.ctlPD != nil {
		errs = append(errs, b.ctlPD.Dealloc())
		b.ctlPD = nil
	}
	return errors.Join(errs...)
}

// closeEndpoint destroys one endpoint and withdraws its entry. It returns the messages still
// in flight or waiting for a send slot on an endpoint that had not failed: nothing will
// deliver or fail those now (see lostOnReplace).
func (b *backupDev) closeEndpoint(ep *ctlEndpoint) (lost []ctlMsg, err error) {
	c := b.c
	b.cqMu.Lock()
	delete(b.ctlCQs, ep.cq)
	b.cqMu.Unlock()
	ep.mu.Lock() // a QP's round on another goroutine may be sending
	ep.closed = true
	lost = ep.takeLostLocked()
	if ep.failed.Load() {
		lost = nil // told when it failed (failAll)
	}
	err = ep.release()
	ep.mu.Unlock()
	if ep.published.Load() {
		ctx, cancel := c.kvCtx()
		_ = c.opts.KV.Delete(ctx, c.ctlKeyGen(b.idx, c.ctlID, ep.peer, ep.gen))
		cancel()
	}
	return lost, err
}

// mix64 is splitmix64's finaliser (the control QPs' first PSNs).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
