package failover

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestRecoveryProperty: random interleavings of application posts (opcode mix, batch sizes,
// signaled or not, long unsignaled runs that make SHIFT fence by count), probe outcomes
// (probes racing a link that is still down) and link events (in the chaotic runs also fed to
// the contexts, which fall back on a down event), for seeded schedules, with one side
// sending or both at once (each direction falls back and recovers on its own): every
// receiver sees every two-sided message exactly once and in order, each WRITE_WITH_IMM finds
// every earlier WRITE's data in place, and every sender sees each signaled completion once,
// in order, without error. The seed is printed; SHIFT_TEST_SEED reruns one.
func TestRecoveryProperty(t *testing.T) {
	base := testSeed()
	for run := range 4 {
		seed := base + uint64(run)
		chaos, both := run%2 == 1, run >= 2
		t.Run(fmt.Sprintf("%d/chaos=%v/both=%v", seed, chaos, both), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with SHIFT_TEST_SEED=%d", base)
				}
			}()
			propertyRun(t, seed, chaos, both)
		})
	}
}

// chaos toggles the link at random times whatever the states (during probes, WaitSignaled,
// WaitDrained, handshakes), then leaves it up.
func chaos(e *testEnv, host int, rng *rand.Rand, stop <-chan struct{}, done chan<- struct{}, count *int) {
	defer close(done)
	up := true
	defer func() {
		if !up {
			e.linkUp(host)
		}
	}()
	for {
		d := time.Duration(5+rng.IntN(120)) * time.Millisecond
		select {
		case <-stop:
			return
		case <-time.After(d):
		}
		if up {
			e.linkDown(host)
		} else {
			e.linkUp(host)
			*count++
		}
		up = !up
	}
}

const propSlot = 512

type propMsg struct {
	op     verbs.WROpcode
	sig    bool
	twoSeq int // index among two-sided messages (-1: one-sided)
}

// propDir is one direction's seeded schedule: its messages live at base+i*propSlot in both
// hosts' buffers (the sender's payload, the receiver's WRITE target); the receiver's
// receives use the upper half of its buffer.
type propDir struct {
	name     string
	seed     uint64
	from, to *testHost
	qs, qr   *QP
	msgs     []propMsg
	base     int
	two      int
	want     []uint64 // signaled wr_ids, in order
	rng      *rand.Rand
}

func newPropDir(name string, seed uint64, from, to *testHost, qs, qr *QP, n, base int) *propDir {
	d := &propDir{name: name, seed: seed, from: from, to: to, qs: qs, qr: qr, base: base,
		msgs: make([]propMsg, n), rng: rand.New(rand.NewPCG(seed, 5))}
	rng := rand.New(rand.NewPCG(seed, 99))
	sigGap := 0
	for i := range d.msgs {
		m := &d.msgs[i]
		switch r := rng.IntN(10); {
		case r < 4:
			m.op = verbs.WRRDMAWrite
		case r < 7:
			m.op = verbs.WRRDMAWriteWithImm
		default:
			m.op = verbs.WRSend
		}
		m.sig = rng.IntN(4) == 0 || sigGap >= 24 || i == n-1
		if rng.IntN(8) == 0 && sigGap < 24 {
			m.sig = false // runs without a signaled WR (the last one too, at times)
		}
		if m.sig {
			sigGap = 0
			d.want = append(d.want, uint64(i))
		} else {
			sigGap++
		}
		m.twoSeq = -1
		if twoSided(m.op) {
			m.twoSeq = d.two
			d.two++
		}
		payload(from.buf.Bytes()[base+i*propSlot:base+(i+1)*propSlot], seed, uint64(i))
	}
	return d
}

// propSender posts one direction's messages under a window and checks its completions.
type propSender struct {
	d                    *propDir
	next, done, lastDone int
	window               int
}

func (s *propSender) finished() bool { return s.done == len(s.d.want) && s.next == len(s.d.msgs) }

// post posts what the window allows (everything once the last signaled WR completed).
func (s *propSender) post() error {
	d := s.d
	for s.next < len(d.msgs) && (s.next-s.lastDone <= s.window-4 || s.done == len(d.want)) {
		k := min(1+d.rng.IntN(4), len(d.msgs)-s.next)
		batch := make([]verbs.SendWR, k)
		for j := range batch {
			i := s.next + j
			m := d.msgs[i]
			w := verbs.SendWR{WRID: uint64(i), Opcode: m.op, SGL: []verbs.SGE{d.from.mr.SGE(d.base+i*propSlot, propSlot)}}
			if m.sig {
				w.Flags = verbs.SendSignaled
			}
			if m.op != verbs.WRSend {
				w.RemoteAddr, w.RKey = d.to.mr.Addr()+uint64(d.base+i*propSlot), d.to.mr.RKey()
			}
			if m.op == verbs.WRRDMAWriteWithImm {
				w.Imm = uint32(i)
			}
			batch[j] = w
		}
		if err := d.qs.PostSend(batch); err != nil {
			return fmt.Errorf("%s: post_send at %d: %w (QP error %v)", d.name, s.next, err, d.qs.Err())
		}
		s.next += k
		// Pace the stream so that it spans several link cycles.
		time.Sleep(time.Duration(d.rng.IntN(2500)) * time.Microsecond)
	}
	return nil
}

func (s *propSender) completion(w verbs.WC) error {
	if s.done == len(s.d.want) {
		return fmt.Errorf("%s: sender: completion after the last signaled one: %+v", s.d.name, w)
	}
	if w.Status != verbs.WCSuccess || w.WRID != s.d.want[s.done] {
		return fmt.Errorf("%s: sender: completion %d: %+v, want wr_id %d", s.d.name, s.done, w, s.d.want[s.done])
	}
	s.lastDone = int(w.WRID)
	s.done++
	return nil
}

// propReceiver keeps one direction's receives posted and checks each arrival.
type propReceiver struct {
	d                   *propDir
	depth, got, lastMsg int
	wantBuf             []byte
}

func (r *propReceiver) sge(k int) []verbs.SGE {
	return []verbs.SGE{r.d.to.mr.SGE(bufSize/2+(k%r.depth)*propSlot, propSlot)}
}

func (r *propReceiver) start() error {
	r.depth = int(r.d.qr.Cap().MaxRecvWR)
	r.lastMsg = -1
	r.wantBuf = make([]byte, propSlot)
	for k := 0; k < min(r.depth, r.d.two); k++ {
		if err := r.d.qr.PostRecv([]verbs.RecvWR{{WRID: uint64(k), SGL: r.sge(k)}}); err != nil {
			return err
		}
	}
	return nil
}

func (r *propReceiver) finished() bool { return r.got == r.d.two }

func (r *propReceiver) arrival(w verbs.WC) error {
	d := r.d
	got := r.got
	if w.Status != verbs.WCSuccess || w.WRID != uint64(got) {
		return fmt.Errorf("%s: receiver: completion %d: %+v", d.name, got, w)
	}
	// The message this receive must hold: the next two-sided one.
	i := r.lastMsg + 1
	for i < len(d.msgs) && d.msgs[i].twoSeq != got {
		i++
	}
	if i == len(d.msgs) {
		return fmt.Errorf("%s: receiver: receive %d beyond the schedule", d.name, got)
	}
	buf := d.to.buf.Bytes()
	switch d.msgs[i].op {
	case verbs.WRSend:
		bb := buf[bufSize/2+(got%r.depth)*propSlot:]
		payload(r.wantBuf, d.seed, uint64(i))
		if w.Opcode != verbs.WCRecv || w.ByteLen != propSlot || !bytes.Equal(bb[:propSlot], r.wantBuf) {
			return fmt.Errorf("%s: receiver: receive %d (message %d): opcode %v byte_len %d seq %d", d.name, got, i, w.Opcode, w.ByteLen, binary.LittleEndian.Uint64(bb))
		}
	default:
		if w.Opcode != verbs.WCRecvRDMAWithImm || w.Imm != uint32(i) {
			return fmt.Errorf("%s: receiver: receive %d: want WRITE_WITH_IMM of message %d, got %v imm %d", d.name, got, i, w.Opcode, w.Imm)
		}
		for j := r.lastMsg + 1; j <= i; j++ {
			if d.msgs[j].op == verbs.WRSend {
				continue
			}
			payload(r.wantBuf, d.seed, uint64(j))
			if !bytes.Equal(buf[d.base+j*propSlot:d.base+(j+1)*propSlot], r.wantBuf) {
				return fmt.Errorf("%s: receiver: WRITE %d not in place at WRITE_WITH_IMM %d", d.name, j, i)
			}
		}
	}
	r.lastMsg = i
	if next := got + r.depth; next < d.two {
		if err := d.qr.PostRecv([]verbs.RecvWR{{WRID: uint64(next), SGL: r.sge(next)}}); err != nil {
			return err
		}
	}
	r.got++
	return nil
}

// hostLoop drives one host: its outgoing direction (s, may be nil) and its incoming one (r,
// may be nil) over the host's single CQ, polling as an application does until both are done
// (an error completion of a trailing unsignaled WR is how SHIFT learns to repost it).
func hostLoop(h *testHost, s *propSender, r *propReceiver, deadline time.Time) error {
	if r != nil {
		if err := r.start(); err != nil {
			return err
		}
	}
	var wcs [32]verbs.WC
	for (s != nil && !s.finished()) || (r != nil && !r.finished()) {
		if s != nil {
			if err := s.post(); err != nil {
				return err
			}
		}
		n, err := h.cq.Poll(wcs[:])
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		for _, w := range wcs[:n] {
			switch {
			case w.Opcode&verbs.WCRecv != 0 && w.Status == verbs.WCSuccess && r != nil:
				err = r.arrival(w)
			case w.Opcode&verbs.WCRecv == 0 && w.Status == verbs.WCSuccess && s != nil:
				err = s.completion(w)
			default:
				err = fmt.Errorf("unexpected completion %+v (%v)", w, w.Status)
			}
			if err != nil {
				return err
			}
		}
		if n == 0 {
			if time.Now().After(deadline) {
				what := ""
				if s != nil {
					what += fmt.Sprintf(" %s sender: %d of %d signaled completions, %d of %d posted;", s.d.name, s.done, len(s.d.want), s.next, len(s.d.msgs))
				}
				if r != nil {
					what += fmt.Sprintf(" %s receiver: %d of %d (last message %d);", r.d.name, r.got, r.d.two, r.lastMsg)
				}
				return fmt.Errorf("timed out:%s", what)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return nil
}

func propertyRun(t *testing.T, seed uint64, chaotic, both bool) {
	rng := rand.New(rand.NewPCG(seed, 99))
	fenceWRs := 4 + rng.IntN(60)
	// The chaotic runs also feed the link events to the contexts (Options.LinkEvents), so
	// that fallbacks started by a down event race everything else too.
	e := newEnvCfg(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		o.FenceAfterWRs = fenceWRs
	}, chaotic)
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	// The schedules: both sides know them. 3000 messages in all.
	n := 3000
	if both {
		n = 1500
	}
	ab := newPropDir("A→B", seed, ha, hb, qa, qb, n, 0)
	sa := &propSender{d: ab, lastDone: -1, window: int(qa.Cap().MaxSendWR) - 8}
	rb := &propReceiver{d: ab}
	var sb *propSender
	var ra *propReceiver
	if both {
		ba := newPropDir("B→A", seed^0x5eed, hb, ha, qb, qa, n, n*propSlot)
		sb = &propSender{d: ba, lastDone: -1, window: int(qb.Cap().MaxSendWR) - 8}
		ra = &propReceiver{d: ba}
	}
	f := &flapper{e: e, qs: []*QP{qa, qb}, host: rng.IntN(2), cycles: 1 << 30,
		rng: rand.New(rand.NewPCG(seed, 7)), done: make(chan struct{})}
	stop := make(chan struct{})
	if chaotic {
		go chaos(e, f.host, f.rng, stop, f.done, &f.count)
	} else {
		go f.run(stop)
	}
	defer func() {
		close(stop)
		<-f.done
	}()
	deadline := time.Now().Add(90 * time.Second)
	errB := make(chan error, 1)
	go func() { errB <- hostLoop(hb, sb, rb, deadline) }()
	errA := hostLoop(ha, sa, ra, deadline)
	if errA == nil {
		errA = <-errB
	} else {
		go func() { <-errB }() // ends at its deadline at the latest
	}
	if errA != nil {
		t.Fatalf("%v\n%s\n%s\n%s", errA, e.describe(qa, qb), qa.debugState(), qb.debugState())
	}
	close(stop)
	<-f.done
	stop = make(chan struct{}) // for the deferred close
	f.done = make(chan struct{})
	close(f.done)
	if f.err != nil {
		t.Fatal(f.err)
	}
	t.Logf("%d messages per direction, both %v, %d link cycles, fence after %d WRs; A %+v; B %+v", n, both, f.count, fenceWRs,
		e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats())
}
