package failover

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/provider/verbs"
	"golang.org/x/sys/unix"
)

// Active switching from outside the process (issue 6): shiftctl switch writes a request into
// the injection file (layout and protocol in inject.go), and the file's watcher goroutine
// calls QP.SwitchToBackup or QP.SwitchToDefault on the QP with that default QPN and answers
// with an errno. The watcher polls instead of waiting on a futex or a signal: the file is
// plain shared memory that tools in any language can write, and a 10 ms reaction is
// immaterial next to a switch.

// Operations of a switch request (offset 20 of the injection file).
const (
	switchOpBackup  = 1
	switchOpDefault = 2
)

// controlPoll is how often a watcher reads the request word.
const controlPoll = 10 * time.Millisecond

// ErrNoAnswer: RequestSwitch got no answer in time: no SHIFT context of the process maps the
// file, or the process is stopped or gone.
var ErrNoAnswer = errors.New("failover: no answer to the switch request")

// liveQPs is a context's QPs by default QPN, for the switch requests. It is off the data
// path (CreateQP, Destroy and the watcher), so a mutex-guarded map is enough.
type liveQPs struct {
	mu sync.Mutex
	m  map[uint32]*QP
}

func (r *liveQPs) add(q *QP) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[uint32]*QP{}
	}
	r.m[q.qpn] = q
}

// remove forgets q, unless its QPN was already reused by a newer QP.
func (r *liveQPs) remove(q *QP) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[q.qpn] == q {
		delete(r.m, q.qpn)
	}
}

// all returns the live QPs (a copy: the caller takes their locks), in QPN order: the re-arm,
// a failed control endpoint and the watchers act on them in this order, and a stepped context
// must do the same thing in the same order every run (a map's order differs from run to run,
// and runs of the simulation with two backups did not replay).
func (r *liveQPs) all() []*QP {
	r.mu.Lock()
	defer r.mu.Unlock()
	qs := make([]*QP, 0, len(r.m))
	for _, q := range r.m {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b *QP) int { return cmp.Compare(a.qpn, b.qpn) })
	return qs
}

func (r *liveQPs) lookup(qpn uint32) *QP {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[qpn]
}

// controlWatcher serves the switch requests written into one mapped injection file, for
// every context of the process that shares the file.
type controlWatcher struct {
	w      switchWords
	inj    injectWords
	injN   int64      // the countdown at the last poll (the watcher's goroutine only)
	injQPN uint32     // the target at the last poll
	mu     sync.Mutex // held while a request is served: leave waits for it
	ctxs   []*Context
	stop   chan struct{}
	exited chan struct{}
}

// startControl starts the watcher of mem, a mapped injection file. A request pending in the
// file is dropped: it was meant for a process that mapped the file before (a file left by a
// crashed process with the same pid), and its writer has given up waiting.
func startControl(mem []byte) *controlWatcher {
	w := &controlWatcher{w: switchWordsOf(mem), inj: injectWordsOf(mem), stop: make(chan struct{}), exited: make(chan struct{})}
	w.w.done.Store(w.w.req.Load())
	w.inj.done.Store(w.inj.req.Load())
	go w.run()
	return w
}

// close stops the watcher and waits for it: the mapping may be unmapped afterwards.
func (w *controlWatcher) close() {
	close(w.stop)
	<-w.exited
}

// join makes c's QPs reachable by the requests.
func (w *controlWatcher) join(c *Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctxs = append(w.ctxs, c)
}

// leave removes c, waiting for a request being served (it may be on one of c's QPs), so
// that no switch runs on a context being closed. Leaving twice is harmless.
func (w *controlWatcher) leave(c *Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range w.ctxs {
		if x == c {
			w.ctxs = append(w.ctxs[:i], w.ctxs[i+1:]...)
			return
		}
	}
}

func (w *controlWatcher) run() {
	defer close(w.exited)
	t := time.NewTicker(controlPoll)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.poll()
	}
}

// poll serves a pending request: the writer stored the QPN and the operation before the
// request sequence, and writes nothing more until done catches up, so both are stable here.
func (w *controlWatcher) poll() {
	w.pollInject()
	req := w.w.req.Load()
	if req == w.w.done.Load() {
		return
	}
	res := w.serve(w.w.qpn.Load(), w.w.op.Load())
	w.w.res.Store(int32(res))
	w.w.done.Store(req)
}

// pollInject arms the injection the file holds in every context sharing it, when a writer
// asked for it (a new request sequence) or changed the words since the last poll, and then
// answers the request. The writer stored the words before the sequence, so a new sequence
// comes with them.
func (w *controlWatcher) pollInject() {
	req := w.inj.req.Load()
	n, qpn := w.inj.n.Load(), w.inj.qpn.Load()
	pending := req != w.inj.done.Load()
	if n != 0 && (pending || n != w.injN || qpn != w.injQPN) {
		w.armAll()
	}
	w.injN, w.injQPN = n, qpn
	if pending {
		w.inj.done.Store(req)
	}
}

// armAll closes the send gates the armed injection may fall on, in every context sharing
// the file (injgate.go).
func (w *controlWatcher) armAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.ctxs {
		c.armInjection()
	}
}

// serve carries out one request and returns its answer (0 or an errno; see RequestSwitch).
func (w *controlWatcher) serve(qpn, op uint32) unix.Errno {
	w.mu.Lock()
	defer w.mu.Unlock()
	var q *QP
	for _, c := range w.ctxs {
		if p := c.live.lookup(qpn); p != nil {
			if q != nil {
				return unix.ENOTUNIQ // QPNs are per device: two contexts may both have it
			}
			q = p
		}
	}
	if q == nil {
		return unix.ENOENT
	}
	q.mu.Lock()
	destroyed, pinned := q.destroyed, q.mach.pinState().local()
	q.mu.Unlock()
	if destroyed {
		return unix.ENOENT // Destroy runs: it leaves the registry next
	}
	switch op {
	case switchOpBackup:
		// A fallback without a connected backup QP is refused and fails the QP: an operator's
		// request must not break a healthy QP, so it is turned down before.
		if !q.BackupReady() {
			return unix.EAGAIN
		}
		return switchErrno(q.SwitchToBackup())
	case switchOpDefault:
		if !pinned {
			return unix.EINVAL // SwitchToDefault only ends a SwitchToBackup
		}
		q.SwitchToDefault()
		return 0
	}
	return unix.EINVAL
}

// switchErrno is the answer for SwitchToBackup's error.
func switchErrno(err error) unix.Errno {
	var errno unix.Errno
	switch {
	case err == nil:
		return 0
	case errors.Is(err, verbs.ErrQPState):
		return unix.EBUSY
	case errors.Is(err, ErrBackupNotReady):
		return unix.EAGAIN
	case errors.As(err, &errno):
		return errno
	}
	return unix.EIO
}

// joinControl registers c with the watcher of its injection file (Open).
func (c *Context) joinControl() {
	if c.injFile != nil {
		c.injFile.ctl.join(c)
	}
}

// leaveControl unregisters c (Close, releaseInject).
func (c *Context) leaveControl() {
	if c.injFile != nil {
		c.injFile.ctl.leave(c)
	}
}

// RequestSwitch asks the process that maps the injection file path (a SHIFT context opened
// with SHIFT_INJECT_SHM=1 or Options.InjectFile = path) to call QP.SwitchToBackup (toBackup)
// or QP.SwitchToDefault on its QP whose default QPN is qpn, and waits up to timeout for the
// answer; it is what shiftctl switch runs. Writers of the same file take turns (flock).
//
// A nil error means the switch started (SendState and RecvState of the QP tell when it
// completed). Otherwise the error names the operation and wraps the file's error, ErrNoAnswer,
// or the process's answer as a unix.Errno: ENOENT (no QP with that number), EBUSY (its states
// refuse the switch), EINVAL (to the default: it was not switched to the backup), EAGAIN (its
// backup QP is not connected yet), ENOTUNIQ (several contexts have a QP with that number),
// or what the fallback failed with.
//
// The file must be a regular file of the caller's user that no other user may write, opened
// without following a link (rundir.Open); RequestSwitchFile takes a file the caller opened and
// checked itself (root acting on another user's process, for instance).
func RequestSwitch(path string, qpn uint32, toBackup bool, timeout time.Duration) error {
	f, err := rundir.Open(path, os.O_RDWR, os.Geteuid())
	if err != nil {
		return fmt.Errorf("failover: switch QP %#x: %w", qpn, err)
	}
	defer f.Close()
	return RequestSwitchFile(f, qpn, toBackup, timeout)
}

// RequestSwitchFile is RequestSwitch on an open injection file.
func RequestSwitchFile(f *os.File, qpn uint32, toBackup bool, timeout time.Duration) error {
	what, op := fmt.Sprintf("switch QP %#x to the default NIC", qpn), uint32(switchOpDefault)
	if toBackup {
		what, op = fmt.Sprintf("switch QP %#x to the backup", qpn), switchOpBackup
	}
	if qpn == 0 || qpn > 0xffffff || timeout <= 0 {
		return fmt.Errorf("failover: %s: %w: want a QPN in [1, 0xffffff] and a timeout > 0", what, unix.EINVAL)
	}
	return withControlFile(f, what, timeout, func(mem []byte, deadline time.Time) error {
		w := switchWordsOf(mem)
		answered, err := exchange(what, f.Name(), timeout, deadline, w.req, w.done, func() { w.qpn.Store(qpn); w.op.Store(op) })
		if err != nil {
			return err
		}
		if !answered {
			return fmt.Errorf("failover: %s: no answer through %s within %v: %w", what, f.Name(), timeout, ErrNoAnswer)
		}
		if res := unix.Errno(w.res.Load()); res != 0 {
			return fmt.Errorf("failover: %s: %s: %w", what, switchRefusal(res), res)
		}
		return nil
	})
}

// RequestInject arms the failure injection of the process that maps the injection file path,
// as Context.Inject does in that process: the n-th WR posted on QP qpn (0: any QP) after the
// call returns gets an invalid lkey; n = 0 disarms. It returns once the process's watcher
// acknowledged the arm (its posts are counted from then on), or ErrNoAnswer after timeout:
// the words stay written, and the process applies them when it reads them (counting from
// then). The file is opened as RequestSwitch opens it.
func RequestInject(path string, qpn uint32, n int64, timeout time.Duration) error {
	f, err := rundir.Open(path, os.O_RDWR, os.Geteuid())
	if err != nil {
		return fmt.Errorf("failover: inject: %w", err)
	}
	defer f.Close()
	return RequestInjectFile(f, qpn, n, timeout)
}

// RequestInjectFile is RequestInject on an open injection file.
func RequestInjectFile(f *os.File, qpn uint32, n int64, timeout time.Duration) error {
	what := fmt.Sprintf("arm injection (QP %#x, WR %d)", qpn, n)
	if n == 0 {
		what = "disarm injection"
	}
	if qpn > 0xffffff || n < 0 || timeout <= 0 {
		return fmt.Errorf("failover: %s: %w: want a QPN in [0, 0xffffff], n ≥ 0 and a timeout > 0", what, unix.EINVAL)
	}
	return withControlFile(f, what, timeout, func(mem []byte, deadline time.Time) error {
		w := injectWordsOf(mem)
		answered, err := exchange(what, f.Name(), timeout, deadline, w.req, w.done, func() { w.qpn.Store(qpn); w.n.Store(n) })
		if err == nil && !answered {
			err = fmt.Errorf("failover: %s: written to %s, but not acknowledged within %v (applied when the process reads it): %w", what, f.Name(), timeout, ErrNoAnswer)
		}
		return err
	})
}

// exchange runs one request of the control file's protocol (what, on the file at path) on its
// sequence words: it waits until an earlier request is answered (a writer that gave up leaves
// one pending, and the request's words are the watcher's until then; ErrNoAnswer past the
// deadline, nothing written), stores the request's words (store), then the next sequence,
// and reports whether done reached it by the deadline.
func exchange(what, path string, timeout time.Duration, deadline time.Time, req, done *atomic.Uint64, store func()) (bool, error) {
	if !waitWord(deadline, func() bool { return req.Load() == done.Load() }) {
		return false, fmt.Errorf("failover: %s: an earlier request in %s is still unanswered after %v: %w", what, path, timeout, ErrNoAnswer)
	}
	seq := req.Load() + 1
	store()
	req.Store(seq)
	return waitWord(deadline, func() bool { return done.Load() == seq }), nil
}

// withControlFile runs fn on the mapping of the open control file f, holding flock(LOCK_EX)
// on it for the whole exchange (writers take turns), once its size is checked. fn gets the
// deadline of its waits.
func withControlFile(f *os.File, what string, timeout time.Duration, fn func(mem []byte, deadline time.Time) error) error {
	path := f.Name()
	deadline := time.Now().Add(timeout)
	fd := int(f.Fd())
	defer unix.Flock(fd, unix.LOCK_UN)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return fmt.Errorf("failover: %s: flock %s: %w", what, path, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failover: %s: %s stayed locked by another request for %v: %w", what, path, timeout, ErrNoAnswer)
		}
		time.Sleep(time.Millisecond)
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("failover: %s: %w", what, err)
	}
	if st.Size() != InjectFileSize {
		return fmt.Errorf("failover: %s: %s: size %d, want %d: not the injection file of a SHIFT library with active switching: %w",
			what, path, st.Size(), InjectFileSize, unix.EINVAL)
	}
	mem, err := unix.Mmap(fd, 0, InjectFileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("failover: %s: mmap %s: %w", what, path, err)
	}
	defer unix.Munmap(mem)
	return fn(mem, deadline)
}

// waitWord polls cond every millisecond until it holds or deadline passes.
func waitWord(deadline time.Time, cond func() bool) bool {
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// switchRefusal says what an answer means for the QP (the errno's own text is generic).
func switchRefusal(e unix.Errno) string {
	switch e {
	case unix.ENOENT:
		return "the process has no QP with this number"
	case unix.EBUSY:
		return "the QP's states refuse the switch"
	case unix.EINVAL:
		return "the QP was not switched to the backup (or the request is malformed)"
	case unix.EAGAIN:
		return "the QP's backup QP is not connected yet"
	case unix.ENOTUNIQ:
		return "several QPs of the process have this number"
	}
	return "the switch failed"
}
