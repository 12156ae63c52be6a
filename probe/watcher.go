package probe

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// maxReplay bounds the transitions replayed from a counter jump (a link that flapped
// faster than any reader can follow is reported as that many events at most).
const maxReplay = 4096

// watched is one watched link and the last state the watcher reported for it.
type watched struct {
	name  string
	index int
	st    linkState
}

type watcher struct {
	opts    Options
	sources []Source
	bpfErr  error

	qmu sync.Mutex // serialises the query socket
	q   *querySocket
	sub *nl.NetlinkSocket
	bpf *bpfSource

	mu      sync.Mutex // guards devs' states and orders the events
	devs    []*watched
	byIndex map[int]*watched

	events    chan LinkEvent
	done      chan struct{}
	kick      chan Source
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New starts a watcher of opts.Netdevs. It fails if a netdev does not exist (ErrNoLink), or
// if opts.EBPF requires an eBPF source the kernel refuses; with EBPFAuto a refused eBPF
// source leaves the netlink sources running and EBPFError says why.
func New(opts Options) (_ Watcher, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	w := &watcher{opts: opts, byIndex: map[int]*watched{}, events: make(chan LinkEvent, opts.Buffer),
		done: make(chan struct{}), kick: make(chan Source, 1)}
	defer func() {
		if err != nil {
			w.release()
		}
	}()
	ns := netns.None()
	if opts.NetNS != "" {
		if ns, err = netns.GetFromPath(opts.NetNS); err != nil {
			return nil, fmt.Errorf("probe: network namespace %s: %w", opts.NetNS, err)
		}
		defer ns.Close()
	}
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("probe: rtnetlink query socket: %w", err)
	}
	w.q = &querySocket{s: s}
	// A query blocked for longer than this is a kernel that does not answer: fail the read
	// (the next poll retries) rather than hang the watcher.
	s.SetReceiveTimeout(&unix.Timeval{Sec: 5})
	for _, name := range opts.Netdevs {
		st, err := w.q.getLink(0, name)
		if err != nil {
			return nil, err
		}
		d := &watched{name: name, index: st.index, st: st}
		w.devs = append(w.devs, d)
		w.byIndex[st.index] = d
	}
	if !opts.NoNetlink {
		if w.sub, err = nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_LINK); err != nil {
			return nil, fmt.Errorf("probe: rtnetlink subscription: %w", err)
		}
		// A bigger receive buffer makes ENOBUFS (lost messages) rarer; it is handled anyway.
		w.sub.SetReceiveBufferSize(1<<20, false)
		w.sources = append(w.sources, SourceNetlink)
	}
	if err := w.startBPF(); err != nil {
		return nil, err
	}
	if opts.DumpInterval > 0 {
		w.sources = append(w.sources, SourceDump)
	}
	if opts.PollInterval > 0 {
		w.sources = append(w.sources, SourceCarrierCount)
	}
	if w.sub != nil {
		w.wg.Add(1)
		go w.subLoop()
	}
	if w.bpf != nil {
		w.wg.Add(1)
		go w.bpfLoop()
	}
	w.wg.Add(1)
	go w.pollLoop()
	return w, nil
}

func (w *watcher) startBPF() error {
	if w.opts.EBPF == EBPFOff {
		return nil
	}
	var errs []error
	if w.opts.EBPF == EBPFAuto || w.opts.EBPF == EBPFFexit {
		idx := make([]int, 0, len(w.devs))
		for _, d := range w.devs {
			idx = append(idx, d.index)
		}
		b, err := startFexit(idx)
		if err == nil {
			w.bpf = b
		} else {
			errs = append(errs, err)
		}
	}
	if w.bpf == nil && (w.opts.EBPF == EBPFAuto || w.opts.EBPF == EBPFTracepoint) {
		b, err := startTracepoint()
		if err == nil {
			w.bpf = b
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		w.bpfErr = fmt.Errorf("probe: eBPF: %w", errors.Join(errs...))
	}
	if w.bpf != nil {
		w.sources = append([]Source{w.bpf.src}, w.sources...)
		return nil
	}
	if w.opts.EBPF != EBPFAuto {
		return w.bpfErr
	}
	return nil
}

func (w *watcher) Events() <-chan LinkEvent { return w.events }
func (w *watcher) Sources() []Source        { return append([]Source(nil), w.sources...) }
func (w *watcher) EBPFError() error         { return w.bpfErr }

// Close stops the goroutines and releases the sockets and eBPF objects, then closes Events.
func (w *watcher) Close() error {
	w.closeOnce.Do(func() {
		close(w.done)
		// Closing the subscription socket and the ring buffer reader wakes their readers.
		if w.sub != nil {
			w.sub.Close()
		}
		var err error
		if w.bpf != nil {
			err = w.bpf.close()
		}
		w.wg.Wait()
		w.qmu.Lock()
		w.q.close()
		w.qmu.Unlock()
		close(w.events)
		w.closeErr = err
	})
	return w.closeErr
}

// release frees what New had set up when New fails.
func (w *watcher) release() {
	if w.sub != nil {
		w.sub.Close()
	}
	if w.bpf != nil {
		w.bpf.close()
	}
	if w.q != nil {
		w.q.close()
	}
}

func (w *watcher) closed() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// subLoop reads RTM_NEWLINK/RTM_DELLINK messages until the socket is closed. A receive
// error (ENOBUFS: the kernel dropped messages) asks the poll loop for a full dump.
func (w *watcher) subLoop() {
	defer w.wg.Done()
	for {
		msgs, _, err := w.sub.Receive()
		if err != nil {
			if w.closed() || errors.Is(err, os.ErrClosed) {
				return
			}
			w.requestDump(SourceDump)
			if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				// An unexpected error: do not spin on it.
				select {
				case <-w.done:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			continue
		}
		now := time.Now()
		for _, m := range msgs {
			if m.Header.Type != unix.RTM_NEWLINK && m.Header.Type != unix.RTM_DELLINK {
				continue
			}
			st, err := parseLink(m)
			if err != nil {
				continue // a message this code cannot decode; the poll reconciles
			}
			w.observe(st.index, st, SourceNetlink, now)
		}
	}
}

// bpfLoop wakes on each ring buffer record and reads the affected links at once.
func (w *watcher) bpfLoop() {
	defer w.wg.Done()
	var rec ringbuf.Record
	if w.bpf.wake != nil {
		w.bpf.rd.SetDeadline(time.Unix(1, 0)) // drain only: the network poller waits (rbwait.go)
	}
	for {
		if err := w.bpf.nextRecord(&rec); err != nil {
			if w.closed() || errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		if w.bpf.src == SourceFexit {
			if idx, ok := decodeFexit(rec.RawSample); ok {
				if d := w.byIndex[idx]; d != nil {
					w.read(d, SourceFexit)
				}
			}
			continue
		}
		// The record may come from another device's carrier change, or from this one's
		// before its peer's side flipped (veth_close turns off its own carrier, then the
		// peer's): when the first read finds nothing, read again shortly after.
		for _, delay := range tracepointRereads {
			if delay > 0 {
				select {
				case <-w.done:
					return
				case <-time.After(delay):
				}
			}
			n := 0
			for _, d := range w.devs {
				n += w.read(d, SourceTracepoint)
			}
			if n > 0 {
				break
			}
		}
	}
}

// tracepointRereads are the delays of the reads that follow a tracepoint record until one
// finds a change.
var tracepointRereads = []time.Duration{0, 100 * time.Microsecond, time.Millisecond}

// requestDump asks the poll loop for a full dump (non-blocking; one pending request is
// enough).
func (w *watcher) requestDump(src Source) {
	select {
	case w.kick <- src:
	default:
	}
}

// pollLoop runs the carrier-counter reads and the periodic dumps.
func (w *watcher) pollLoop() {
	defer w.wg.Done()
	var pollC, dumpC <-chan time.Time
	if w.opts.PollInterval > 0 {
		t := time.NewTicker(w.opts.PollInterval)
		defer t.Stop()
		pollC = t.C
	}
	if w.opts.DumpInterval > 0 {
		t := time.NewTicker(w.opts.DumpInterval)
		defer t.Stop()
		dumpC = t.C
	}
	for {
		select {
		case <-w.done:
			return
		case <-pollC:
			for _, d := range w.devs {
				w.read(d, SourceCarrierCount)
			}
		case <-dumpC:
			w.dump(SourceDump)
		case src := <-w.kick:
			w.dump(src)
		}
	}
}

// read reads one link and reports what changed. A failed read reports nothing: the link
// keeps its last known state until a read succeeds (ENODEV is a read that succeeded).
// It returns the number of events emitted.
func (w *watcher) read(d *watched, src Source) int {
	w.qmu.Lock()
	st, err := w.q.getLink(d.index, d.name)
	w.qmu.Unlock()
	if errors.Is(err, ErrNoLink) {
		st, err = linkState{index: d.index, gone: true}, nil
	}
	if err != nil {
		return 0
	}
	return w.observe(d.index, st, src, time.Now())
}

// dump reads every link; watched links missing from the answer are reported gone.
func (w *watcher) dump(src Source) {
	w.qmu.Lock()
	all, err := w.q.dump()
	w.qmu.Unlock()
	if err != nil {
		return
	}
	now := time.Now()
	seen := make(map[int]bool, len(w.devs))
	for _, st := range all {
		if _, ok := w.byIndex[st.index]; ok {
			seen[st.index] = true
			w.observe(st.index, st, src, now)
		}
	}
	for _, d := range w.devs {
		if !seen[d.index] {
			w.observe(d.index, linkState{index: d.index, gone: true}, src, now)
		}
	}
}

// observe compares st with the last state reported for the link and emits the transitions
// between them, in order: the carrier flips that the kernel's counters show (each one a
// down or an up event), then a final event if the usable state still differs (an
// administrative change, or a link that disappeared).
// It returns the number of events emitted.
func (w *watcher) observe(index int, st linkState, src Source, now time.Time) (n int) {
	d := w.byIndex[index]
	if d == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := d.st
	if st.name != "" && st.name != d.name {
		// Renamed: keep watching the index, report with the new name.
		d.name = st.name
	}
	if !st.gone && !st.hasCounts && prev.hasCounts {
		st.carrierUp, st.carrierDn, st.hasCounts = prev.carrierUp, prev.carrierDn, true
	}
	if !st.gone && st.hasCounts && prev.hasCounts &&
		(int32(st.carrierDn-prev.carrierDn) < 0 || int32(st.carrierUp-prev.carrierUp) < 0) {
		// Older than what was already reported (a queued netlink message read after a
		// poll): nothing new in it.
		return 0
	}
	ev := LinkEvent{Netdev: d.name, Ifindex: index, Source: src, Time: now, DownCount: st.carrierDn, UpCount: st.carrierUp}
	last := prev.usable()
	if prev.hasCounts && st.hasCounts && !st.gone {
		// Counters only grow (mod 2^32); a flip that both reads missed still moved them.
		flips := (st.carrierDn - prev.carrierDn) + (st.carrierUp - prev.carrierUp)
		if flips > maxReplay {
			flips = maxReplay
		}
		carrier := prev.carrier()
		admin := st.flags&unix.IFF_UP != 0
		for i := uint32(0); i < flips; i++ {
			carrier = !carrier
			up := admin && carrier
			if up != last {
				ev.Up = up
				if !w.emit(ev) {
					return n
				}
				n++
				last = up
			}
		}
	}
	if cur := st.usable(); cur != last {
		ev.Up = cur
		if !w.emit(ev) {
			return n
		}
		n++
	}
	if st.gone {
		st.flags = 0
		st.carrierUp, st.carrierDn, st.hasCounts = prev.carrierUp, prev.carrierDn, prev.hasCounts
	}
	d.st = st
	return n
}

// emit delivers ev unless the watcher is closing.
func (w *watcher) emit(ev LinkEvent) bool {
	select {
	case w.events <- ev:
		return true
	case <-w.done:
		return false
	}
}
