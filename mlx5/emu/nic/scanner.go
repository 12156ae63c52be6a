package nic

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The idle scanner: one goroutine per process looks at the doorbell registers of every
// parked device (a device whose watcher saw nothing for spinWindow) and wakes the watcher of
// one that has work. Its period starts at minScan whenever a device parks or something
// happens that software answers by posting (hot), and doubles up to maxScan, so an idle
// process pays one wake-up per maxScan whatever the number of its devices, pages and QPs,
// and a doorbell rung shortly after activity waits about as long as the time since that
// activity, at most.
//
// Below maxScan it waits on a timerfd read through the runtime's network poller, not on a
// Go timer (at maxScan a Go timer is as good and cheaper, see run): the runtime waits for its timers in epoll_pwait, whose timeout is in milliseconds, so
// time.Sleep(50 µs) on an otherwise idle process sleeps about 1.1 ms (BenchmarkSleepWake),
// which made the old per-device watcher wake 1–2 ms late. A timerfd wakes the poller within
// the kernel's timer latency (50–90 µs beyond the request on the 2-core CI VM), and the
// scanner parks like any goroutine meanwhile, so the watchers it wakes run on its P at once.
// Its expiry is seen only by a thread waiting in the poller, though: when every thread is
// busy it waits for the next scheduler event (or sysmon, up to 10 ms).
// nanosleep on a locked thread was tried: as precise, but the thread keeps its P while it
// sleeps (a P in a system call is only retaken by sysmon), so a woken watcher waited behind
// it for milliseconds whenever the other P ran a busy-polling application.
//
// A wake-up costs about 60 µs of CPU on that VM whatever the mechanism (timerfd, nanosleep
// or Go timer). maxScan is 1 ms because that keeps an idle process at about 5 % of a core
// (BenchmarkIdleCPU), where a timerfd period of 500 µs cost 10 % and 200 µs 29 %. minScan
// is 100 µs because a shorter period buys nothing there: with the timer's latency a 20 µs
// period wakes every 60–80 µs and would take a whole core while it lasts, and
// BenchmarkNetnsLinkDown's p50 was the same within noise for 20, 50, 100 and 200 µs
// (1.7–2.0 ms).
const (
	minScan = 100 * time.Microsecond
	maxScan = time.Millisecond
)

// idleScanner is the process's idle scanner; it runs while any device exists.
type idleScanner struct {
	mu      sync.Mutex
	devices int           // live devices
	parked  []*Device     // devices whose watcher waits for the scanner
	more    chan struct{} // a device parked, or hot was called: look again now
	quit    chan struct{} // closed when the last device closes
	done    chan struct{} // closed when the goroutine has exited
	tick    *ticker       // the running scanner's, under mu
	// period is the scanner's current period (0: stopped, no device parked); written under
	// mu, read without it by hot.
	period atomic.Int64
}

var idle = idleScanner{more: make(chan struct{}, 1)}

// attach counts a new device, starting the scanner with the first.
func (s *idleScanner) attach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices++
	if s.devices == 1 {
		s.quit, s.done = make(chan struct{}), make(chan struct{})
		s.tick = newTicker()
		go s.run(s.quit, s.done, s.tick)
	}
}

// detach forgets a closed device (its watcher has exited); the last one stops the scanner
// and waits for it, so no goroutine or descriptor outlives the devices.
func (s *idleScanner) detach() {
	s.mu.Lock()
	s.devices--
	var done chan struct{}
	if s.devices == 0 {
		close(s.quit)
		done = s.done
	}
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// park hands d's registers to the scanner: it sends on d.wake when d has work. d was just
// active, so the scanner starts again from its shortest period.
func (s *idleScanner) park(d *Device) {
	s.mu.Lock()
	s.parked = append(s.parked, d)
	if s.period.Load() != 0 {
		s.setPeriodLocked(minScan)
	}
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// unpark takes d off the scanner's list, if it is there.
func (s *idleScanner) unpark(d *Device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.parked {
		if x == d {
			last := len(s.parked) - 1
			s.parked[i] = s.parked[last]
			s.parked[last] = nil
			s.parked = s.parked[:last]
			return
		}
	}
}

// hot tells the scanner that software is about to react to something a device did (a port
// changed state, a QP failed, an error CQE was written, a completion event was raised),
// which it answers by posting, often on another, idle device (SHIFT's fallback: a
// notification on the backup NIC, the peer's reply, the reposted WRs): the scanner goes
// back to its shortest period at once. It costs one atomic load when the scanner is already
// there or stopped.
func (s *idleScanner) hot() {
	if p := s.period.Load(); p <= int64(minScan) {
		return
	}
	s.mu.Lock()
	if s.period.Load() > int64(minScan) {
		s.setPeriodLocked(minScan)
	}
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// setPeriodLocked reprograms the running scanner's ticker (s.mu held). The timerfd runs
// below maxScan only; at maxScan the scanner waits on a Go timer (run).
func (s *idleScanner) setPeriodLocked(p time.Duration) {
	if s.tick == nil || s.period.Load() == int64(p) {
		return
	}
	s.period.Store(int64(p))
	if p >= maxScan {
		p = 0
	}
	s.tick.set(p)
}

func (s *idleScanner) run(quit, done chan struct{}, tick *ticker) {
	defer close(done)
	defer func() {
		s.mu.Lock()
		if s.tick == tick {
			s.tick = nil
			s.period.Store(0)
		}
		tick.close()
		s.mu.Unlock()
	}()
	var (
		list    []*Device
		scratch []*QP
		slow    = time.NewTimer(time.Hour)
	)
	defer slow.Stop()
	for {
		s.mu.Lock()
		n := len(s.parked)
		if n == 0 {
			s.setPeriodLocked(0) // nobody to watch: the timer stops
		} else if s.period.Load() == 0 {
			s.setPeriodLocked(minScan)
		}
		s.mu.Unlock()
		if n == 0 {
			select {
			case <-quit:
				return
			case <-s.more:
			}
			continue
		}
		if p := time.Duration(s.period.Load()); p >= maxScan || tick.f == nil {
			// At the longest period a Go timer is as good as the timerfd (its millisecond
			// resolution is the period's) and cheaper: no read system calls, and the
			// runtime coalesces its wake-up with the others'. A park or hot ends it early.
			slow.Reset(p)
			select {
			case <-quit:
				return
			case <-slow.C:
			case <-s.more:
				slow.Stop()
			}
		} else {
			select {
			case <-quit:
				return
			case <-s.more:
			default:
			}
			tick.wait()
		}
		s.mu.Lock()
		if p := time.Duration(s.period.Load()); p != 0 {
			s.setPeriodLocked(min(2*p, maxScan))
		}
		list = append(list[:0], s.parked...)
		s.mu.Unlock()
		for i, d := range list {
			var has bool
			if has, scratch = d.pending(scratch); has {
				s.unpark(d)
				// A poke that ended this park first has woken the watcher already, and the
				// watcher must learn that from Unpark (spinAfterWake).
				if d.waker.Claim() {
					select {
					case d.wake <- struct{}{}:
					default:
					}
				}
			} else {
				d.stats.passes.Add(1) // the registers were looked at, as by a watcher pass
				d.stats.idleLooks.Add(1)
			}
			list[i] = nil
		}
	}
}

// ticker is the scanner's periodic timer: a timerfd read through the runtime's network
// poller. Where timerfd is unavailable it falls back to time.Sleep.
type ticker struct {
	f      *os.File
	fd     int
	period atomic.Int64
	buf    [8]byte
}

func newTicker() *ticker {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return &ticker{fd: -1}
	}
	return &ticker{f: os.NewFile(uintptr(fd), "emu-idle-scanner"), fd: fd}
}

// set makes the ticker fire every d from now; 0 stops it.
func (t *ticker) set(d time.Duration) {
	t.period.Store(int64(d))
	if t.f == nil {
		return
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_ = unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{Interval: ts, Value: ts}, nil)
}

// wait blocks until the ticker fired at least once since the last wait.
func (t *ticker) wait() {
	if t.f != nil {
		if _, err := t.f.Read(t.buf[:]); err == nil {
			return
		}
	}
	// No timerfd, or a read error (not expected): never spin.
	time.Sleep(max(time.Duration(t.period.Load()), minScan))
}

func (t *ticker) close() {
	if t.f != nil {
		t.f.Close()
	}
}
