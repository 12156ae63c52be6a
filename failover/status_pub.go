package failover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/internal/rundir"
)

// DefaultStatusInterval is the publishing interval of a context whose
// Options.StatusInterval is 0.
const DefaultStatusInterval = time.Second

// statusMinGap is the least time between two publications that state transitions asked for:
// a QP that flaps does not turn the publisher into a busy loop.
const statusMinGap = 20 * time.Millisecond

// statusSeq numbers the contexts of the process (ProcessStatus.Seq, the status file name).
var statusSeq atomic.Uint64

// statusPublisher writes a context's status file: it marshals Context.Status into a
// temporary file of the runtime directory and renames it over the status file, so that a
// reader opens either the previous or the new content, never a partial one, and never waits
// for the writer (nor the writer for a reader). It publishes every interval and, at most
// every statusMinGap, after a state transition.
type statusPublisher struct {
	c        *Context
	dir      string
	name     string // the status file's name in dir
	interval time.Duration
	kick     chan struct{} // state transitions (eventTrack.kick)
	stop     chan struct{}
	exited   chan struct{}
	err      atomic.Pointer[error] // the last publication's error (nil: it succeeded)
	wmu      sync.Mutex            // one write at a time (the temporary file's name is fixed)
	stopOnce sync.Once
}

// startStatus publishes c's status file in dir ("": rundir.Default, /dev/shm/shift-<uid>)
// every interval (0: DefaultStatusInterval; negative: no status file). A directory or first
// write that fails leaves the context without one, and StatusErr says why.
func (c *Context) startStatus(dir string, interval time.Duration) {
	if interval < 0 {
		return
	}
	if interval == 0 {
		interval = DefaultStatusInterval
	}
	c.pid, c.seq = os.Getpid(), statusSeq.Add(1)
	start, err := rundir.ProcStart(c.pid)
	if err != nil {
		c.statusErr = fmt.Errorf("failover: status file: %w", err)
		return
	}
	c.start = start
	p, err := newStatusPublisher(c, dir, interval)
	if err != nil {
		c.statusErr = fmt.Errorf("failover: status file: %w", err)
		return
	}
	c.pub = p
	if err := p.publish(); err != nil {
		c.pub = nil
		c.statusErr = err
		p.remove()
		return
	}
	go p.run()
}

func newStatusPublisher(c *Context, dir string, interval time.Duration) (*statusPublisher, error) {
	if dir == "" {
		dir = rundir.Default()
	}
	if err := rundir.Ensure(dir); err != nil {
		return nil, err
	}
	if _, err := rundir.RemoveStale(dir); err != nil {
		return nil, err
	}
	return &statusPublisher{c: c, dir: dir, name: rundir.StatusName(c.pid, c.start, c.seq), interval: interval,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{})}, nil
}

func (p *statusPublisher) run() {
	defer close(p.exited)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		case <-p.kick:
			if d := time.Until(last.Add(statusMinGap)); d > 0 {
				w := time.NewTimer(d)
				select {
				case <-p.stop:
					w.Stop()
					return
				case <-w.C:
				}
			}
		}
		_ = p.publish() // the error is kept for StatusErr
		last = time.Now()
	}
}

// publish writes the status file once.
func (p *statusPublisher) publish() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	err := p.write()
	if err != nil {
		err = fmt.Errorf("failover: publish status %s: %w", filepath.Join(p.dir, p.name), err)
		p.err.Store(&err)
		return err
	}
	p.err.Store(nil)
	return nil
}

func (p *statusPublisher) write() error {
	b, err := json.Marshal(p.c.Status())
	if err != nil {
		return err
	}
	tmp := p.name + rundir.TempSuffix
	// A temporary file left by a failed write is ours (our pid and start time name it).
	if err := os.Remove(filepath.Join(p.dir, tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := rundir.Create(p.dir, tmp)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(b, '\n'))
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), filepath.Join(p.dir, p.name))
}

// close stops the publisher and removes the status file. Closing twice is harmless.
func (p *statusPublisher) close() error {
	var err error
	p.stopOnce.Do(func() {
		close(p.stop)
		<-p.exited
		err = p.remove()
	})
	return err
}

func (p *statusPublisher) remove() error {
	var errs []error
	for _, n := range []string{p.name + rundir.TempSuffix, p.name} {
		if err := os.Remove(filepath.Join(p.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failover: remove status file: %w", err)
	}
	return nil
}

// StatusFile is the path of the context's status file ("" without one).
func (c *Context) StatusFile() string {
	if c.pub == nil {
		return ""
	}
	return filepath.Join(c.pub.dir, c.pub.name)
}

// StatusErr is why the context has no status file (the runtime directory is not private to
// this user, for instance), or why its last publication failed; nil when it is up to date
// or publishing is off (Options.StatusInterval negative).
func (c *Context) StatusErr() error {
	if c.pub != nil {
		if e := c.pub.err.Load(); e != nil {
			return *e
		}
		return nil
	}
	return c.statusErr
}

// PublishStatus writes the context's status file now, as the publisher does at its interval
// (for tools and tests that want a reader to see a change at once).
func (c *Context) PublishStatus() error {
	if c.pub == nil {
		return c.statusErr
	}
	return c.pub.publish()
}

var (
	commOnce sync.Once
	comm     string
)

// procComm is the process's name as the kernel keeps it (/proc/self/comm).
func procComm() string {
	commOnce.Do(func() {
		if b, err := os.ReadFile("/proc/self/comm"); err == nil {
			comm = strings.TrimSpace(string(b))
		}
	})
	return comm
}

// statusKick is the channel a QP's state transitions wake the publisher through (nil
// without a status file).
func (c *Context) statusKick() chan struct{} {
	if c.pub == nil {
		return nil
	}
	return c.pub.kick
}
