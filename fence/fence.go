package fence

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// WR names a send WR in a QP's send ring: the producer position of its first WQEBB and the
// wr_id it was posted with (the pair the provider's completions and OutstandingSends carry).
type WR struct {
	Pos  uint32
	WRID uint64
}

// PostSignaled posts wr on qp with the doorbell, forcing it signaled, and returns its ring
// position: the way a caller that issues its own fence WR (a signaled zero-length WRITE, say)
// gets the reference Begin needs.
func PostSignaled(qp *provider.QP, wr verbs.SendWR) (WR, error) {
	pos := qp.SendProducer()
	wr.Flags |= verbs.SendSignaled
	one := [1]verbs.SendWR{wr}
	if err := qp.PostSend(one[:]); err != nil {
		return WR{}, fmt.Errorf("fence: post fence WR: %w", err)
	}
	return WR{Pos: pos, WRID: wr.WRID}, nil
}

// Fence moves a send stream from QP old to QP new across one fence WR. One Fence serves one
// pair of QPs and any number of fences one after the other (Reset between them).
//
// Concurrency: Post, Begin, HandleWC, Abort and Withheld serialise on the fence's lock, which
// is also what keeps the doorbell rings of HandleWC from racing a withheld post on the new QP
// (the provider's rule that one goroutine drives a QP's send side at a time). While a fence is
// pending, nothing but the fence may post on the new QP. State and Stats are lock-free.
type Fence struct {
	old, new *provider.QP

	mu    sync.Mutex
	state atomic.Uint32

	fence      WR     // the fence WR on old
	notify     WR     // the notification on new, when hasNotify
	hasNotify  bool   // whether this fence has a notification
	held       uint32 // position of the first withheld application WQE on new
	pendingWRs uint64 // application WRs withheld since Begin
	// Signaled WRs still outstanding before the fence WR (notification) on its QP with the
	// same wr_id at Begin: that many matching completions are theirs, not the fence's.
	fenceDups, notifyDups int
	cause                 error // why the fence failed

	scratch []provider.SendWQE // OutstandingSends buffer, sized at New
	ctr     counters
}

// New returns an idle fence from oldQP to newQP, two distinct QPs with send queues.
func New(oldQP, newQP *provider.QP) (*Fence, error) {
	if oldQP == nil || newQP == nil || oldQP == newQP {
		return nil, fmt.Errorf("fence: new: %w: need two distinct QPs", ErrInvalidArgument)
	}
	n := max(oldQP.Cap().MaxSendWR, newQP.Cap().MaxSendWR)
	if n == 0 {
		return nil, fmt.Errorf("fence: new: %w: QP without a send queue", ErrInvalidArgument)
	}
	// A WQE takes at least one WQEBB, so the rings never hold more than their block count;
	// max_send_wr rounded as the provider reports it bounds that with room to spare.
	return &Fence{old: oldQP, new: newQP, scratch: make([]provider.SendWQE, 0, 4*int(n)+4)}, nil
}

// Old is the QP the stream leaves; New the QP it moves to.
func (f *Fence) Old() *provider.QP { return f.old }

// New is the QP the stream moves to.
func (f *Fence) New() *provider.QP { return f.new }

// State is the fence's current state (an atomic load).
func (f *Fence) State() State { return State(f.state.Load()) }

// Stats returns the fence's counters.
func (f *Fence) Stats() Stats { return f.ctr.snapshot() }

// Err is why the fence failed (nil unless State is Failed).
func (f *Fence) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cause
}

// FenceWR is the fence WR of the current or last fence.
func (f *Fence) FenceWR() WR {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fence
}

// Notification is the notification WR of the current or last fence, and whether it had one.
func (f *Fence) Notification() (WR, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notify, f.hasNotify
}

func (f *Fence) set(s State) { f.state.Store(uint32(s)) }

// Begin starts a fence: fenceWR is a signaled WR the caller has posted (and rung) on the old
// QP and whose completion it has not polled yet. If notify is not nil it is written on the
// new QP first, signaled, with the doorbell withheld; it will be released alone once the
// fence WR completes, and the withheld WRs once it completes in turn. Every WR the new QP
// already holds must have been rung (the fence releases only what it withheld).
func (f *Fence) Begin(fenceWR WR, notify *verbs.SendWR) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.State(); s != Idle {
		return fmt.Errorf("fence: begin: %w: %v", ErrState, s)
	}
	w, ok, dups := f.find(f.old, fenceWR.Pos, fenceWR.WRID)
	switch {
	case !ok:
		return fmt.Errorf("fence: begin: %w: position %d is not an outstanding WQE of QP %#x (its completion must not be polled before Begin)",
			ErrInvalidArgument, fenceWR.Pos, f.old.QPN())
	case w.WRID != fenceWR.WRID:
		return fmt.Errorf("fence: begin: %w: WQE at %d has wr_id %#x, not %#x", ErrInvalidArgument, fenceWR.Pos, w.WRID, fenceWR.WRID)
	case !w.Signaled:
		return fmt.Errorf("fence: begin: %w: fence WR at %d is unsignaled", ErrInvalidArgument, fenceWR.Pos)
	case !w.Rung:
		return fmt.Errorf("fence: begin: %w: fence WR at %d was never rung", ErrInvalidArgument, fenceWR.Pos)
	}
	if p, r := f.new.SendProducer(), f.new.SendRung(); p != r {
		return fmt.Errorf("fence: begin: %w: QP %#x holds unrung WQEs (rung %d, producer %d)", ErrInvalidArgument, f.new.QPN(), r, p)
	}
	f.fence, f.hasNotify, f.notify, f.cause, f.pendingWRs = fenceWR, false, WR{}, nil, 0
	f.fenceDups, f.notifyDups = dups, 0
	if notify != nil {
		one := [1]verbs.SendWR{*notify}
		one[0].Flags |= verbs.SendSignaled
		pos := f.new.SendProducer()
		// The notification is the caller's own WR, not the application's: it may take a
		// slot the QP keeps back (provider.QP.ReserveSend).
		if _, err := f.new.PostSendNoDoorbellInternal(one[:]); err != nil {
			return fmt.Errorf("fence: begin: post notification: %w", err)
		}
		f.notify, f.hasNotify = WR{Pos: pos, WRID: notify.WRID}, true
		_, _, f.notifyDups = f.find(f.new, pos, notify.WRID)
	}
	f.held = f.new.SendProducer()
	f.ctr.begun.Add(1)
	f.set(Withholding)
	return nil
}

// Post posts wrs on the new QP: written with the doorbell withheld while the fence is
// pending (Withholding or Notifying), posted normally once it is Done. It allocates nothing.
// An idle or failed fence refuses (ErrState, ErrFailed); provider errors come back wrapped.
func (f *Fence) Post(wrs []verbs.SendWR) error {
	f.mu.Lock()
	switch f.State() {
	case Withholding, Notifying:
		_, err := f.new.PostSendNoDoorbell(wrs)
		if err != nil {
			f.mu.Unlock()
			return fmt.Errorf("fence: withheld post: %w", err)
		}
		f.pendingWRs += uint64(len(wrs))
		f.mu.Unlock()
		f.ctr.withheldWRs.Add(uint64(len(wrs)))
		return nil
	case Done:
		err := f.new.PostSend(wrs)
		f.mu.Unlock()
		if err != nil {
			return fmt.Errorf("fence: post: %w", err)
		}
		return nil
	case Failed:
		f.mu.Unlock()
		return ErrFailed
	default:
		f.mu.Unlock()
		return fmt.Errorf("fence: post: %w: no fence begun", ErrState)
	}
}

// HandleWC hands in one completion polled from the old or the new QP's send CQ. It reports
// whether the completion belonged to the fence (the fence WR, the notification, or an error
// of the old QP that dooms the fence WR); completions that are not the fence's are left to
// the caller. On the fence WR's successful completion the new QP's doorbell is rung up to the
// notification alone (state Notifying) or, with no notification, up to everything withheld
// (Done); on the notification's, up to everything withheld (Done). An error completion moves
// the fence to Failed and returns an error wrapping ErrFenceWR or ErrNotification; the
// withheld WQEs stay unrung.
//
// A completion is the fence WR's when it carries the old QP's number and the fence wr_id,
// after as many such completions as there were signaled WRs with that wr_id outstanding
// before the fence WR at Begin (an earlier WR that reused the wr_id must not release the
// fence early), and once the fence WR's WQE has left the old ring; the same holds for the
// notification on the new QP. So completions must be handed in in the order they were
// polled, and those polled before Begin must be handed in before Begin.
func (f *Fence) HandleWC(wc *verbs.WC) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.State() {
	case Withholding:
		if wc.QPNum != f.old.QPN() {
			return false, nil
		}
		if wc.Status != verbs.WCSuccess {
			// On an RC QP an error completion moves it to ERR: the fence WR can only flush.
			return true, f.fail(fmt.Errorf("fence: %w: wr_id %#x on QP %#x (fence wr_id %#x): %v",
				ErrFenceWR, wc.WRID, wc.QPNum, f.fence.WRID, wc.Status))
		}
		if wc.WRID != f.fence.WRID {
			return false, nil
		}
		if f.fenceDups > 0 {
			f.fenceDups-- // an earlier signaled WR with the same wr_id
			return false, nil
		}
		if _, out, _ := f.find(f.old, f.fence.Pos, 0); out {
			return false, nil // not polled yet: a completion Begin did not know of
		}
		if f.hasNotify {
			if err := f.new.RingSendDoorbell(f.held); err != nil {
				return true, f.fail(fmt.Errorf("fence: release notification: %w", err))
			}
			f.ctr.notifications.Add(1)
			f.set(Notifying)
			return true, nil
		}
		return true, f.releaseAll()
	case Notifying:
		if wc.QPNum != f.new.QPN() {
			return false, nil
		}
		if wc.Status != verbs.WCSuccess {
			// Only the notification is rung on the new QP, so the error is its own or a flush.
			return true, f.fail(fmt.Errorf("fence: %w: wr_id %#x on QP %#x: %v", ErrNotification, wc.WRID, wc.QPNum, wc.Status))
		}
		if wc.WRID != f.notify.WRID {
			return false, nil
		}
		if f.notifyDups > 0 {
			f.notifyDups--
			return false, nil
		}
		if _, out, _ := f.find(f.new, f.notify.Pos, 0); out {
			return false, nil
		}
		return true, f.releaseAll()
	}
	return false, nil
}

// releaseAll rings the new QP up to its producer and completes the fence. Called with mu held.
func (f *Fence) releaseAll() error {
	if err := f.new.RingSendDoorbell(f.new.SendProducer()); err != nil {
		return f.fail(fmt.Errorf("fence: release withheld WRs: %w", err))
	}
	f.ctr.releasedWRs.Add(f.pendingWRs)
	f.ctr.released.Add(1)
	f.set(Done)
	return nil
}

// fail records cause and moves to Failed. Called with mu held.
func (f *Fence) fail(cause error) error {
	f.cause = cause
	f.ctr.failed.Add(1)
	f.set(Failed)
	return cause
}

// Abort fails a pending fence on the caller's decision (a link went down, say), leaving the
// withheld WQEs unrung. It returns ErrState when no fence is pending.
func (f *Fence) Abort(cause error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.State(); !s.pending() {
		return fmt.Errorf("fence: abort: %w: %v", ErrState, s)
	}
	f.cause = fmt.Errorf("%w: %w", ErrAborted, cause)
	f.ctr.aborted.Add(1)
	f.set(Failed)
	return nil
}

// Reset makes a done, failed or idle fence idle again for the next fence. It does not touch
// the rings: after a failure the caller copies the withheld WQEs away (Withheld) and resets
// the QPs itself. A pending fence cannot be reset (ErrState); Abort it first.
func (f *Fence) Reset() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.State(); s.pending() {
		return fmt.Errorf("fence: reset: %w: %v", ErrState, s)
	}
	f.fence, f.notify, f.hasNotify, f.cause, f.pendingWRs = WR{}, WR{}, false, nil, 0
	f.set(Idle)
	return nil
}

// find looks pos up among q's outstanding send WQEs and counts the signaled ones before it
// that carry wrid. Called with mu held (it uses scratch).
func (f *Fence) find(q *provider.QP, pos uint32, wrid uint64) (w provider.SendWQE, found bool, dups int) {
	f.scratch = q.OutstandingSends(f.scratch[:0])
	for _, e := range f.scratch {
		if e.Pos == pos {
			return e, true, dups
		}
		if e.Signaled && e.WRID == wrid {
			dups++
		}
	}
	return provider.SendWQE{}, false, 0
}
