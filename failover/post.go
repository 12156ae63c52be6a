package failover

import (
	"errors"
	"fmt"
	"slices"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// PostSend is ibv_post_send. In Default it is the provider's post on the default QP (the
// provider keeps what fails in its ring for the fallback to copy, so nothing is logged); in
// a fallback state it posts on the backup QP with keys rewritten, or keeps the WRs in order
// behind the old sends while the handshake runs.
func (q *QP) PostSend(wrs []verbs.SendWR) error {
	if !q.sendGate.enter() {
		return q.postSendSlow(wrs)
	}
	// The provider's post, inlined: no call of SHIFT's between. An armed injection keeps
	// the gate closed (injgate.go), so nothing else is read here.
	if err := q.def.PostSend(wrs); err != nil {
		return q.postSendFailed(wrs, err)
	}
	q.sendGate.leave()
	return nil
}

// postSendFailed ends a fast PostSend whose post failed (the poster is inside the gate). A
// default QP in ERR means a failure SHIFT handles: the WRs go to the inbox, whose drain on
// the engine falls the QP back first and then posts them where the state says (inbox.go);
// the application's thread does not wait for the fallback.
func (q *QP) postSendFailed(wrs []verbs.SendWR, err error) error {
	if errors.Is(err, verbs.ErrQPState) && q.defErrUnseen() {
		q.sendGate.closeAndLeave()
		return q.inboxUnseen(wrs)
	}
	q.sendGate.leave()
	return err
}

// inboxUnseen leaves wrs, refused by a default QP in ERR that SHIFT has not seen fail, to the
// engine: its drain falls back first (postInboxSendsLocked). The send gate is closed.
func (q *QP) inboxUnseen(wrs []verbs.SendWR) error {
	if q.inboxSends(wrs) {
		return nil
	}
	return q.PostSend(wrs) // the gate opened meanwhile: a fallback ran
}

// postDefaultLocked is postDefault once the QP fell back at least once (q.mu held): the
// signaled WRs' kinds are recorded for the classifier, and behind a pending fence the WRs are
// written with the doorbell withheld.
func (q *QP) postDefaultLocked(wrs []verbs.SendWR, viaFence bool) error {
	nsig := 0
	for i := range wrs {
		if q.sigAll || wrs[i].Flags&verbs.SendSignaled != 0 {
			nsig++
		}
	}
	q.fifoMu.Lock()
	for range nsig {
		q.dSendKinds = append(q.dSendKinds, kindApp)
	}
	q.fifoMu.Unlock()
	q.scq.mu.Lock()
	err := q.postDefaultVia(wrs, viaFence)
	q.scq.mu.Unlock()
	if err != nil {
		q.fifoMu.Lock()
		q.dSendKinds = q.dSendKinds[:len(q.dSendKinds)-nsig]
		q.fifoMu.Unlock()
	}
	return err
}

// postDefault posts wrs on the default QP; the caller owns the send side.
func (q *QP) postDefault(wrs []verbs.SendWR) error { return q.postDefaultVia(wrs, false) }

func (q *QP) postDefaultVia(wrs []verbs.SendWR, viaFence bool) error {
	post := wrs
	if q.c.injArmed.Load() != 0 {
		post = q.inject(wrs)
	}
	if viaFence {
		return q.fn.Post(post)
	}
	return q.def.PostSend(post)
}

// inject returns wrs with the armed fault applied to the WR it falls on (a copy of the list;
// the corrupted lkey is remembered in injKeys so that the copy on the backup gets the
// application's MR).
func (q *QP) inject(wrs []verbs.SendWR) []verbs.SendWR {
	if t := q.c.injQPN.Load(); t != 0 && t != q.qpn {
		return wrs
	}
	for i := range wrs {
		if len(wrs[i].SGL) == 0 || wrs[i].Flags&verbs.SendInline != 0 {
			continue // nothing with a key to corrupt
		}
		n := q.c.injArmed.Add(-1)
		if n < 0 {
			q.c.injArmed.Store(0)
			return wrs
		}
		if n > 0 {
			continue
		}
		out := append(q.injWRs[:0], wrs...)
		sgl := append(q.injSGE[:0], wrs[i].SGL...)
		sgl[0].LKey ^= 0x00ff_ff00
		if q.injKeys == nil {
			q.injKeys = map[uint32]uint32{}
		}
		q.injKeys[sgl[0].LKey] = wrs[i].SGL[0].LKey
		out[i].SGL = sgl
		q.injHit.Store(true)
		return out
	}
	return wrs
}

func (q *QP) postSendSlow(wrs []verbs.SendWR) error {
	if q.sendGate.enterBackup() {
		done, err := q.postBackupFast(wrs)
		q.sendGate.leave()
		if done {
			return err
		}
	}
	if q.box.nSend.Load() != 0 || !tryLockPost(&q.mu, false) {
		// A transition holds q.mu, maybe in the kernel: the engine posts these once it is
		// done (inbox.go).
		if q.inboxSends(wrs) {
			return nil
		}
		return q.PostSend(wrs) // the gate opened meanwhile
	}
	if q.sendKeysMissLocked(wrs) && q.inboxSends(wrs) {
		// A remote key the cache does not hold: read off this thread (keywait.go).
		q.mu.Unlock()
		return nil
	}
	if q.mach.holdState() == HoldPosts {
		// A round waits with q.mu released: where WRs go is not settled (roundwait.go).
		q.queueSendsLocked(wrs)
		q.mu.Unlock()
		return nil
	}
	err := q.postSendLocked(wrs)
	if err == nil {
		// The next posts on the backup without q.mu (backupgate.go), or on the default QP
		// once an injection that kept the gate closed is spent (injgate.go).
		q.openBackupLocked(&q.sendGate, q.mach.sendState() == SendFallback)
		q.injReopenLocked()
	}
	unseen := err != nil && q.defFailedUnseenLocked()
	q.mu.Unlock()
	if unseen {
		// The default QP failed before SHIFT saw it, as in postSendFailed.
		return q.inboxUnseen(wrs)
	}
	return err
}

// defErrUnseen reports whether the default QP is in ERR by no doing of the application's
// (its Modify to ERR: appstop.go): a failure SHIFT handles.
func (q *QP) defErrUnseen() bool {
	return q.def.State() == verbs.QPStateErr && !q.appStopping.Load()
}

// defFailedUnseenLocked reports whether the default QP failed (defErrUnseen) while the send
// side is still Default: a failure no completion has told SHIFT of yet. q.mu held.
func (q *QP) defFailedUnseenLocked() bool {
	return q.mach.sendState() == SendDefault && q.defErrUnseen()
}

// recvFailedUnseenLocked is defFailedUnseenLocked for the receive side.
func (q *QP) recvFailedUnseenLocked() bool {
	return q.mach.recvState() == RecvDefault && q.defErrUnseen()
}

// postSendLocked posts wrs where the send state says (q.mu held).
func (q *QP) postSendLocked(wrs []verbs.SendWR) error {
	switch q.mach.sendState() {
	case SendDefault:
		if q.tracked {
			return q.postDefaultLocked(wrs, q.fn != nil && q.fn.State() != fence.Idle && q.fn.State() != fence.Done && q.fn.State() != fence.Failed)
		}
		return q.postDefault(wrs)
	case SendWaitSignaled:
		return q.postWaitSignaledLocked(wrs)
	case SendWaitDrained:
		return q.postDefaultLocked(wrs, true)
	case SendHandshake:
		q.queueSendsLocked(wrs)
		return nil
	case SendFallback:
		return q.postBackupLocked(wrs)
	}
	if q.appErr && !q.c.defDead.Load() {
		return q.def.PostSend(wrs) // as without SHIFT: the provider answers for a QP in ERR
	}
	return fmt.Errorf("failover: post_send on QP %#x: %w: %w", q.qpn, ErrFailed, verbs.ErrQPState)
}

// rewriteLocked returns a copy of w for the backup QP: local keys through the MR table, the
// remote key through the cache of the peer's MR entries (no I/O: rkcache.go), SendIneligible
// cleared.
// The mapped SGEs are appended to *sges (scratch reused under q.mu: the provider reads a
// WR's SGL only during the post).
func (q *QP) rewriteLocked(w verbs.SendWR, sges *[]verbs.SGE) (verbs.SendWR, error) {
	bd := q.cs().dev
	w.Flags &^= SendIneligible
	if w.Flags&verbs.SendInline == 0 && len(w.SGL) > 0 {
		start := len(*sges)
		for _, s := range w.SGL {
			k, ok := q.km.lkeyOf(bd, s.LKey)
			if !ok {
				return w, fmt.Errorf("failover: lkey %#x has no backup MR: %w", s.LKey, ErrBackupNotReady)
			}
			s.LKey = k
			*sges = append(*sges, s)
		}
		w.SGL = (*sges)[start:len(*sges):len(*sges)]
	}
	switch w.Opcode {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRRDMARead,
		verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAdd:
		n := uint64(8) // an atomic's operand
		if w.Opcode != verbs.WRAtomicCmpAndSwp && w.Opcode != verbs.WRAtomicFetchAdd {
			n = 0
			for _, s := range w.SGL {
				n += uint64(s.Length)
			}
			if n == 0 {
				// A zero-length RDMA touches no memory and its rkey is not checked (a
				// stand-in for a delivered WR, held.go, carries none): nothing to map.
				return w, nil
			}
		}
		k, err := q.km.rkeyOf(bd, q.remote.GID, w.RKey, w.RemoteAddr, n)
		if err != nil {
			return w, err
		}
		w.RKey = k
	}
	return w, nil
}

// postTimedLocked is a round's repost on b: the provider's post and doorbell are the
// round's device time (tPost).
func (q *QP) postTimedLocked(b *provider.QP, wrs []verbs.SendWR) error {
	t0 := q.c.now()
	err := b.PostSend(wrs)
	q.roundDeviceTime(&q.tPost, t0)
	return err
}

// postBackupLocked posts application WRs on the backup QP in use, in order, and logs them
// (bkLog) until they complete, for the next backup should this one fail.
func (q *QP) postBackupLocked(wrs []verbs.SendWR) error { return q.postBackupOnLocked(wrs, false) }

// postBackupOnLocked is postBackupLocked; with repost (a round's repost) the provider's post
// counts as the round's device time.
func (q *QP) postBackupOnLocked(wrs []verbs.SendWR, repost bool) error {
	bs := q.cs()
	b := bs.qp.Load()
	// Size the scratch first so appends never move SGEs already handed out.
	nsge := 0
	for i := range wrs {
		nsge += len(wrs[i].SGL)
	}
	if cap(q.bkSGE) < nsge {
		q.bkSGE = make([]verbs.SGE, 0, nsge)
	}
	sges := q.bkSGE[:0]
	out := q.bkWRs[:0]
	nsig := 0
	for i := range wrs {
		w, err := q.rewriteLocked(wrs[i], &sges)
		if err != nil {
			return fmt.Errorf("failover: post_send on QP %#x: %w", q.qpn, err)
		}
		out = append(out, w)
		if q.sigAll || w.Flags&verbs.SendSignaled != 0 {
			nsig++
		}
	}
	q.fifoMu.Lock()
	m := q.beginPush(bs)
	for range nsig {
		bs.sendKinds = append(bs.sendKinds, kindApp)
	}
	q.logBackupFifo(wrs)
	q.endPush(bs, &m)
	q.fifoMu.Unlock()
	// The backup rings are posted under the CQ mutex their poller holds: the provider's
	// wr_id tables are shared by post and poll (and that ordering runs through the NIC, which
	// the race detector cannot see).
	q.scq.mu.Lock()
	var err error
	if repost {
		err = q.postTimedLocked(b, out)
	} else {
		err = b.PostSend(out)
	}
	q.scq.mu.Unlock()
	if err != nil {
		q.fifoMu.Lock()
		q.rollbackFifo(bs, m)
		q.fifoMu.Unlock()
		return fmt.Errorf("failover: post_send on backup of QP %#x: %w", q.qpn, err)
	}
	clear(out)
	q.bkWRs, q.bkSGE = out[:0], sges[:0]
	return nil
}

// PostRecv is ibv_post_recv: logged and posted on the default QP in Default, posted on the
// backup QP (lkeys rewritten) after a fallback.
func (q *QP) PostRecv(wrs []verbs.RecvWR) error {
	if !q.recvGate.enter() {
		return q.postRecvSlow(wrs)
	}
	if err := q.postRecvDefault(wrs); err != nil {
		return q.postRecvFailed(wrs, err)
	}
	q.recvGate.leave()
	return nil
}

// postRecvFailed is postSendFailed for receives: refused by a default QP in ERR that SHIFT
// has not seen fail, they go to the inbox, whose drain falls back first.
func (q *QP) postRecvFailed(wrs []verbs.RecvWR, err error) error {
	if errors.Is(err, verbs.ErrQPState) && q.defErrUnseen() {
		q.recvGate.closeAndLeave()
		return q.inboxUnseenRecvs(wrs)
	}
	q.recvGate.leave()
	return err
}

// inboxUnseenRecvs is inboxUnseen for receives; the receive gate is closed.
func (q *QP) inboxUnseenRecvs(wrs []verbs.RecvWR) error {
	if q.inboxRecvs(wrs) {
		return nil
	}
	return q.PostRecv(wrs) // the gate opened meanwhile: a fallback ran
}

func (q *QP) postRecvDefault(wrs []verbs.RecvWR) error {
	if len(wrs) > int(q.cap.MaxRecvWR) {
		return &verbs.WRError{Op: "post_recv", Index: int(q.cap.MaxRecvWR), Limit: int(q.cap.MaxRecvWR), Got: len(wrs), Err: verbs.ErrRQFull}
	}
	p := q.rPosted.Load()
	for i := range wrs {
		if !q.logRecv(p+uint64(i), &wrs[i]) {
			return &verbs.WRError{Op: "post_recv", Index: i, Limit: q.rstride, Got: len(wrs[i].SGL), Err: verbs.ErrTooManySGE}
		}
	}
	if err := q.def.PostRecv(wrs); err != nil {
		return err
	}
	q.rPosted.Store(p + uint64(len(wrs)))
	return nil
}

func (q *QP) postRecvSlow(wrs []verbs.RecvWR) error {
	if q.recvGate.enterBackup() {
		err := q.postRecvFallbackLocked(wrs) // inside the backup mode (backupgate.go)
		q.recvGate.leave()
		return err
	}
	// A send poster on the backup may run meanwhile (backupgate.go).
	if q.box.nRecv.Load() != 0 || !tryLockPost(&q.mu, true) {
		// A transition holds q.mu, maybe in the kernel (inbox.go).
		if q.inboxRecvs(wrs) {
			return nil
		}
		return q.PostRecv(wrs) // the gate opened meanwhile
	}
	if q.mach.holdState() == HoldPosts {
		err := q.holdRecvsLocked(wrs) // a round waits with q.mu released (roundwait.go)
		q.mu.Unlock()
		return err
	}
	err := q.postRecvLocked(wrs)
	unseen := err != nil && q.recvFailedUnseenLocked()
	q.mu.Unlock()
	if unseen {
		return q.inboxUnseenRecvs(wrs) // as in postRecvFailed
	}
	return err
}

// postRecvLocked posts wrs where the receive state says (q.mu held, no hold).
func (q *QP) postRecvLocked(wrs []verbs.RecvWR) error {
	switch q.mach.recvState() {
	case RecvDefault:
		if !q.tracked {
			return q.postRecvDefault(wrs)
		}
		q.fifoMu.Lock()
		for range wrs {
			q.dRecvKinds = append(q.dRecvKinds, kindApp)
		}
		q.fifoMu.Unlock()
		q.rcq.mu.Lock()
		err := q.postRecvDefault(wrs)
		q.rcq.mu.Unlock()
		if err != nil {
			q.fifoMu.Lock()
			q.dRecvKinds = q.dRecvKinds[:len(q.dRecvKinds)-len(wrs)]
			q.fifoMu.Unlock()
		}
		return err
	case RecvFallback:
		err := q.postRecvFallbackLocked(wrs)
		if err == nil {
			q.openBackupLocked(&q.recvGate, true) // in RecvFallback here
		}
		return err
	}
	if q.appErr && !q.c.defDead.Load() {
		// As without SHIFT. A dead device's QP may still look as it was (a Modify to ERR
		// it refused with EIO: appstop.go): what it took would never complete.
		return q.def.PostRecv(wrs)
	}
	return fmt.Errorf("failover: post_recv on QP %#x: %w: %w", q.qpn, ErrFailed, verbs.ErrQPState)
}

// postRecvFallbackLocked posts wrs on the backup, logged too: a recovery reposts the
// outstanding receives on the default QP (q.mu, or inside the receive gate's backup mode).
func (q *QP) postRecvFallbackLocked(wrs []verbs.RecvWR) error {
	p := q.rPosted.Load()
	for i := range wrs {
		if !q.logRecv(p+uint64(i), &wrs[i]) {
			return &verbs.WRError{Op: "post_recv", Index: i, Limit: q.rstride, Got: len(wrs[i].SGL), Err: verbs.ErrTooManySGE}
		}
	}
	if err := q.postRecvBackupLocked(wrs); err != nil {
		return err
	}
	q.rPosted.Store(p + uint64(len(wrs)))
	return nil
}

// postRecvBackupLocked posts wrs on the backup QP in use with their lkeys mapped (q.mu; the
// mapped WRs are built in scratch the QP reuses: the provider reads them only during the
// post).
func (q *QP) postRecvBackupLocked(wrs []verbs.RecvWR) error {
	return q.postRecvsBackupLocked(len(wrs), func(i int) verbs.RecvWR { return wrs[i] })
}

// postRecvsBackupLocked is postRecvBackupLocked on the n WRs at(0), …, at(n-1): a round
// moving its receives reads them from the receive log in place, without a list of its own
// (which took 2.2 µs p50 of the peer's answer with 64 receives, a temporary trace of
// 2026-11-30).
func (q *QP) postRecvsBackupLocked(n int, at func(i int) verbs.RecvWR) error {
	bs := q.cs()
	nsge := 0
	for i := range n {
		nsge += len(at(i).SGL)
	}
	if cap(q.bkRSGE) < nsge {
		q.bkRSGE = make([]verbs.SGE, 0, nsge)
	}
	// One allocation for a list longer than any before (a fallback's receives moving, the
	// first time: growing by appends took several µs of the peer's answer).
	sges, out := q.bkRSGE[:0], slices.Grow(q.bkRWRs[:0], n)
	for i := range n {
		w := at(i)
		start := len(sges)
		for _, s := range w.SGL {
			k, ok := q.kmR.lkeyOf(bs.dev, s.LKey)
			if !ok {
				return fmt.Errorf("failover: post_recv on QP %#x: lkey %#x has no backup MR: %w", q.qpn, s.LKey, ErrBackupNotReady)
			}
			s.LKey = k
			sges = append(sges, s)
		}
		out = append(out, verbs.RecvWR{WRID: w.WRID, SGL: sges[start:len(sges):len(sges)]})
	}
	q.fifoMu.Lock()
	bs.recvKinds = slices.Grow(bs.recvKinds, len(out))
	for range out {
		bs.recvKinds = append(bs.recvKinds, kindApp)
	}
	q.fifoMu.Unlock()
	q.rcq.mu.Lock()
	err := bs.qp.Load().PostRecv(out)
	q.rcq.mu.Unlock()
	clear(out)
	q.bkRWRs, q.bkRSGE = out[:0], sges[:0]
	if err != nil {
		q.fifoMu.Lock()
		bs.recvKinds = bs.recvKinds[:len(bs.recvKinds)-len(out)]
		q.fifoMu.Unlock()
		return fmt.Errorf("failover: post_recv on backup of QP %#x: %w", q.qpn, err)
	}
	return nil
}
