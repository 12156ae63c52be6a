package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/probe"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Series names of a run's timeline, in Sample.Bytes order: the two streams' verified bytes,
// then the payload bytes through host 0's NICs (sent plus received, as the fabric counts them).
var Series = []string{"WRITE", "SEND", "NIC0", "NIC1"}

// Event is something the schedule did during a run.
type Event struct {
	At   time.Duration
	What string
}

// Result is one run's outcome.
type Result struct {
	Mode    Mode
	Config  Config
	Samples []Sample
	Streams []StreamResult
	Events  []Event
	// Stack is what the stack reported about itself (the failover's counters).
	Stack string
}

// BytesVerified is the payload the receivers verified, over both streams.
func (r *Result) BytesVerified() uint64 {
	var n uint64
	for _, s := range r.Streams {
		n += s.BytesVerified
	}
	return n
}

// MsgsVerified is the number of messages the receivers verified.
func (r *Result) MsgsVerified() uint64 {
	var n uint64
	for _, s := range r.Streams {
		n += s.MsgsVerified
	}
	return n
}

// Errors is every error the application saw, stream by stream.
func (r *Result) Errors() []AppError {
	var out []AppError
	for _, s := range r.Streams {
		out = append(out, s.Errors...)
	}
	return out
}

// NICBytesAfter is the traffic through host 0's NIC0 and NIC1 in the intervals that start at
// or after t.
func (r *Result) NICBytesAfter(t time.Duration) (nic0, nic1 uint64) {
	for _, s := range r.Samples {
		if s.At-s.Span >= t {
			nic0 += s.Bytes[2]
			nic1 += s.Bytes[3]
		}
	}
	return nic0, nic1
}

// Notes are the run's facts beyond the verdict: each stream's longest stall, and where the
// traffic went after the link came back.
func (r *Result) Notes() []string {
	var out []string
	for _, s := range r.Streams {
		if s.MsgsVerified == 0 {
			continue
		}
		n := fmt.Sprintf("%s stream: longest pause between verified messages %v, ending at %.2fs",
			s.Name, s.LongestPause.Round(time.Millisecond), s.PauseEnd.Seconds())
		if len(s.Errors) > 0 {
			n += fmt.Sprintf("; last message verified at %.2fs, then the stream died (%s)", s.LastVerified.Seconds(), s.Errors[0].What)
		}
		out = append(out, n)
	}
	if on, ok := r.OnBackupAt(); ok {
		how := "the failure found by the RC retry timeout: no link watcher"
		if r.Mode == ModeShiftWatch {
			how = "the failure found by the link-down event"
		}
		out = append(out, fmt.Sprintf("traffic on the backup NIC %.2fs after the link went down (%s)", (on-r.Config.FailAt).Seconds(), how))
	}
	if r.Config.hasRecovery() {
		n0, n1 := r.NICBytesAfter(r.Config.RecoverAt)
		where := "traffic back on the default NIC"
		switch {
		case n0 == 0 && n1 == 0:
			where = "no traffic"
		case n0 == 0:
			where = "traffic stayed on the backup NIC (no switch-back)"
		case n1 > n0:
			where = "traffic mostly on the backup NIC"
		}
		out = append(out, fmt.Sprintf("after the link came back at %v: NIC0 %s bytes, NIC1 %s bytes: %s",
			r.Config.RecoverAt, groupDigits(n0), groupDigits(n1), where))
	}
	if r.Stack != "" {
		out = append(out, r.Stack)
	}
	return out
}

// StackFor returns the constructor of mode's stack.
func StackFor(m Mode) (func(devs [][]string, cfg SideConfig) (Stack, error), error) {
	switch m {
	case ModeProvider:
		return NewProviderStack, nil
	case ModeShift, ModeShiftWatch:
		return NewShiftStack, nil
	}
	return nil, fmt.Errorf("demo: unknown mode %q", m)
}

var runSeq atomic.Uint64

// Run builds two emulated hosts with two NICs each, runs the workload over mode's stack for
// cfg.Duration, takes host FailHost's default NIC link down at FailAt and up at RecoverAt, and
// samples the throughput every Interval. progress, if not nil, gets a live line per sample.
// An error means the run could not be set up; errors the workload saw are in the Result.
func Run(ctx context.Context, cfg Config, mode Mode, progress io.Writer) (res *Result, err error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	newStack, err := StackFor(mode)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("demo%d_%d_", os.Getpid(), runSeq.Add(1))
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, Seed: cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("demo: emulated hosts: %w", err)
	}
	defer func() { err = errors.Join(err, cl.Close()) }()
	devs := [][]string{{prefix + "0", prefix + "1"}, {prefix + "2", prefix + "3"}}

	slotsW := cfg.WriteSlots * cfg.WriteChunk * cfg.WriteParts
	sc := SideConfig{
		Cap: verbs.QPCap{MaxSendWR: uint32((cfg.WriteParts+1)*cfg.WriteSlots + cfg.SendSlots + 8),
			MaxRecvWR: uint32(2*cfg.WriteSlots + cfg.SendSlots + 8), MaxSendSGE: 1, MaxRecvSGE: 1},
		Attr: verbs.ConnectAttr{Timeout: cfg.Timeout},
		CQE:  4 * (cfg.WriteSlots*(cfg.WriteParts+1) + cfg.SendSlots + 8),
	}
	if mode == ModeShiftWatch {
		// The link watcher's part, from the emulated fabric: each host's default NIC's link
		// changes, as probe.Watcher reports a netdev's.
		var cancels []func()
		defer func() {
			for _, c := range cancels {
				c()
			}
		}()
		sc.LinkEvents = func(h int) <-chan probe.LinkEvent {
			ch := make(chan probe.LinkEvent, 64)
			cancels = append(cancels, cl.Endpoint(h, 0, 1).Watch(func(ev fabric.LinkEvent) {
				select {
				case ch <- probe.LinkEvent{Netdev: devs[h][0], Up: ev.Up, Time: time.Now()}:
				default: // the context has the later events
				}
			}))
			return ch
		}
	}
	stack, err := newStack(devs, sc)
	if err != nil {
		return nil, fmt.Errorf("%s mode: %w", mode, err)
	}
	defer func() { err = errors.Join(err, stack.Close()) }()

	// stack.Close (deferred above) closes every Side the stack opened.
	pair := func(size int) (Side, Side, error) {
		a, err := stack.Open(0, size)
		if err != nil {
			return nil, nil, err
		}
		b, err := stack.Open(1, size)
		if err != nil {
			return nil, nil, err
		}
		if err := a.Connect(b.Endpoint()); err != nil {
			return nil, nil, fmt.Errorf("demo: connect host 0 → host 1: %w", err)
		}
		if err := b.Connect(a.Endpoint()); err != nil {
			return nil, nil, fmt.Errorf("demo: connect host 1 → host 0: %w", err)
		}
		return a, b, nil
	}
	ws, wr, err := pair(slotsW)
	if err != nil {
		return nil, err
	}
	ss, sr, err := pair(cfg.SendSlots * cfg.SendSize)
	if err != nil {
		return nil, err
	}
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	err = stack.Ready(rctx)
	rcancel()
	if err != nil {
		return nil, fmt.Errorf("%s mode: %w", mode, err)
	}

	start := time.Now()
	w := &writeStream{slots: cfg.WriteSlots, chunk: cfg.WriteChunk, parts: cfg.WriteParts, snd: ws, rcv: wr,
		st: &streamStats{name: "WRITE", start: start}}
	s := &sendStream{slots: cfg.SendSlots, size: cfg.SendSize, snd: ss, rcv: sr,
		st: &streamStats{name: "SEND", start: start}}
	nic := func(n int) Counter {
		ep := cl.Endpoint(0, n, 1)
		return func() uint64 { st := ep.Stats(); return st.TxBytes + st.RxBytes }
	}
	smp, err := NewSampler(realClock{}, Series, []Counter{w.st.bytes.Load, s.st.bytes.Load, nic(0), nic(1)})
	if err != nil {
		return nil, err
	}
	res = &Result{Mode: mode, Config: cfg}

	var evMu sync.Mutex
	event := func(what string) {
		evMu.Lock()
		res.Events = append(res.Events, Event{At: time.Since(start), What: what})
		evMu.Unlock()
	}
	link := cl.Endpoint(cfg.FailHost, 0, 1)
	if cfg.hasFailure() {
		t := time.AfterFunc(cfg.FailAt, func() { event(fmt.Sprintf("host %d NIC0 link down", cfg.FailHost)); link.SetLinkUp(false) })
		defer t.Stop()
	}
	if cfg.hasRecovery() {
		t := time.AfterFunc(cfg.RecoverAt, func() { event(fmt.Sprintf("host %d NIC0 link up", cfg.FailHost)); link.SetLinkUp(true) })
		defer t.Stop()
	}

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){w.sender, w.receiver, s.sender, s.receiver} {
		wg.Go(func() { f(wctx) })
	}
	tick := time.NewTicker(cfg.Interval)
	end := time.NewTimer(cfg.Duration)
loop:
	for {
		select {
		case <-tick.C:
			// A tick that comes soon after a late one would close a sliver of an interval
			// whose rate is mostly noise: fold it into the next interval instead.
			if smp.Open() < cfg.Interval/2 {
				continue
			}
			sm := smp.Sample()
			if progress != nil {
				fmt.Fprintf(progress, "\r[%-8s] %5.1fs  WRITE %6.2f  SEND %6.2f Gbit/s  NIC0 %6.2f  NIC1 %6.2f  link %-4s  errors %d ",
					mode, sm.At.Seconds(), sm.Rate(0), sm.Rate(1), sm.Rate(2), sm.Rate(3), upDown(link.LinkUp()),
					len(w.st.errors())+len(s.st.errors()))
			}
		case <-end.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	tick.Stop()
	cancel()
	wg.Wait()
	if progress != nil {
		fmt.Fprintln(progress)
	}
	res.Stack = stack.Summary()
	res.Samples = smp.Samples()
	res.Streams = []StreamResult{w.st.result(), s.st.result()}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// nicIdle is the rate below which a NIC counts as carrying no traffic: a fraction of the
// run's peak NIC rate (probes and notifications stay far below it).
func (r *Result) nicIdle() float64 {
	peak := 0.0
	for _, s := range r.Samples {
		peak = max(peak, s.Rate(2), s.Rate(3))
	}
	return peak / 20
}

// OnBackupAt is the end of the first sampling interval after the failure in which host 0's
// backup NIC (NIC1) carried traffic, in a run with a failure; false when it never did.
func (r *Result) OnBackupAt() (time.Duration, bool) {
	if !r.Config.hasFailure() {
		return 0, false
	}
	idle := r.nicIdle()
	for _, s := range r.Samples {
		if s.At > r.Config.FailAt && s.Rate(3) > idle {
			return s.At, true
		}
	}
	return 0, false
}

// BackOnDefaultAt is the end of the first sampling interval after the recovery in which the
// default NIC carried the traffic again (more than the backup), in a run with a recovery.
func (r *Result) BackOnDefaultAt() (time.Duration, bool) {
	if !r.Config.hasRecovery() {
		return 0, false
	}
	idle := r.nicIdle()
	for _, s := range r.Samples {
		if s.At > r.Config.RecoverAt && s.Rate(2) > idle && s.Rate(2) > s.Rate(3) {
			return s.At, true
		}
	}
	return 0, false
}
