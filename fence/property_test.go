package fence_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The property test drives random rounds of fences in both directions between the two paths
// and checks that no WR ever executes out of order or twice. Every application WR is a
// CMP_AND_SWP on one counter word of the receiver: WR k compares with k and swaps in k+1, and
// its original value comes back into result slot k of the sender. Executed exactly once and
// in order, WR k returns k; executed before an earlier WR, or again, it returns something else.
// So after a round: every result slot holds k or the untouched sentinel, the slots holding k
// are exactly those below the final counter value, and with no failure the counter equals the
// number of WRs posted.

const (
	ctrOff   = 0    // counter word in the receiver's buffer
	resOff   = 4096 // result slots in the sender's buffer
	sentinel = ^uint64(0)
)

func TestPropertyNoReorderNoDuplicate(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if s := os.Getenv("FENCE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("FENCE_SEED=%q: %v", s, err)
		}
		seeds = []uint64{v}
	}
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			p := newProp(t, seed)
			for r := range rounds {
				p.round(r)
				if t.Failed() {
					return
				}
			}
			var dropped uint64
			for _, e := range p.b.cluster.Fabric.Endpoints() {
				dropped += e.Stats().TxDropped + e.Stats().RxDropped
			}
			t.Logf("seed %d: %d WRs; fence stats %+v / %+v; rounds with link down or loss %d, with error completions %d; packets lost %d",
				seed, p.seq, p.fences[0].Stats(), p.fences[1].Stats(), p.flaps, p.errRounds, dropped)
		})
	}
}

type prop struct {
	t      *testing.T
	b      *bed
	seed   uint64
	rng    *rand.Rand
	fences [2]*fence.Fence // fences[d] moves traffic from path d to path 1-d
	cur    int             // the path traffic runs on
	seq    uint64          // next sequence number
	log    []string        // this round's actions

	flaps, errRounds int
}

func newProp(t *testing.T, seed uint64) *prop {
	b := newBed(t)
	p := &prop{t: t, b: b, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), cur: pathBackup}
	for d := range 2 {
		f, err := fence.New(b.snd[d].qp, b.snd[1-d].qp)
		if err != nil {
			t.Fatal(err)
		}
		p.fences[d] = f
	}
	res := b.sbuf.Bytes()[resOff:]
	for i := range res {
		res[i] = 0xff
	}
	return p
}

func (p *prop) failf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("seed %d (rerun with FENCE_SEED=%d): "+format+"\nround log: %s", append(append([]any{p.seed, p.seed}, args...),
		strings.Join(p.log, " "))...)
}

func (p *prop) logf(format string, args ...any) { p.log = append(p.log, fmt.Sprintf(format, args...)) }

// cas is application WR k on path.
func (p *prop) cas(path int, k uint64, signaled bool) verbs.SendWR {
	fl := verbs.SendFlags(0)
	if signaled {
		fl = verbs.SendSignaled
	}
	s, r := p.b.snd[path], p.b.rcv[path]
	return verbs.SendWR{WRID: 1<<32 | k, Opcode: verbs.WRAtomicCmpAndSwp, Flags: fl,
		SGL: []verbs.SGE{s.mr.SGE(resOff+8*int(k), 8)}, RemoteAddr: r.mr.Addr() + ctrOff, RKey: r.mr.RKey(),
		CompareAdd: k, Swap: k + 1}
}

func (p *prop) result(k uint64) uint64 {
	return binary.NativeEndian.Uint64(p.b.sbuf.Bytes()[resOff+8*int(k):])
}

// roundState is what one round saw.
type roundState struct {
	errWCs   int  // error completions (fence's or not)
	flapped  bool // a link went down or lost packets during the round
	aborted  bool
	badFence bool
}

func (p *prop) round(r int) {
	t, b, rng := p.t, p.b, p.rng
	p.log = p.log[:0]
	old, nw := p.cur, 1-p.cur
	f := p.fences[old]
	start := p.seq
	var st roundState

	// The old path: some WRs, the last one the signaled fence WR.
	nOld := 1 + rng.IntN(10)
	st.badFence = rng.IntN(8) == 0
	p.logf("r%d:%d→%d old=%d bad=%v", r, old, nw, nOld, st.badFence)
	for i := 0; i < nOld-1; i++ {
		if err := b.snd[old].qp.PostSend([]verbs.SendWR{p.cas(old, p.seq, rng.IntN(4) == 0)}); err != nil {
			p.failf("post on old: %v", err)
		}
		p.seq++
	}
	fwr := p.cas(old, p.seq, true)
	if st.badFence {
		fwr.RKey ^= 0x5a5a00
	}
	fw, err := fence.PostSignaled(b.snd[old].qp, fwr)
	if err != nil {
		p.failf("post fence WR: %v", err)
	}
	p.seq++
	var notify *verbs.SendWR
	if rng.IntN(2) == 0 {
		b.postRecvs(t, nw, 1)
		n := b.writeImm(nw, 0xabc000+uint64(r), bufSize-128, uint32(r))
		notify = &n
	}
	if err := f.Begin(fw, notify); err != nil {
		p.failf("begin: %v", err)
	}

	// Random packet loss on one path, in both directions (requests and ACKs), makes the RC
	// transport retransmit underneath the fence.
	if rng.IntN(3) == 0 {
		l := rng.IntN(2)
		b.link(l).Faults(fabric.TX).SetLoss(0.1)
		b.link(l).Faults(fabric.RX).SetLoss(0.1)
		st.flapped = true
		p.logf("loss%d", l)
	}

	// Random interleaving of posts through the fence, completions handed in, link flaps
	// and aborts.
	var withheld []uint64 // wr_ids posted while the fence was pending
	nNew := rng.IntN(24)
	down := [2]bool{}
	for posted := 0; posted < nNew; {
		switch a := rng.IntN(10); {
		case a < 5:
			n := min(1+rng.IntN(4), nNew-posted)
			wrs := make([]verbs.SendWR, n)
			for i := range wrs {
				wrs[i] = p.cas(nw, p.seq+uint64(i), rng.IntN(4) == 0)
			}
			pending := f.State() == fence.Withholding || f.State() == fence.Notifying
			if err := f.Post(wrs); err != nil {
				if errors.Is(err, fence.ErrFailed) {
					p.logf("post-refused")
					posted = nNew
					break
				}
				p.failf("post through the fence in %v: %v", f.State(), err)
			}
			for i := range wrs {
				if pending {
					withheld = append(withheld, wrs[i].WRID)
				}
			}
			p.seq += uint64(n)
			posted += n
			p.logf("post%d(%v)", n, pending)
		case a < 7:
			p.drive(f, &st)
		case a < 8:
			// Give the NICs time to move packets (into a down link, or to complete).
			time.Sleep(time.Duration(50+rng.IntN(1000)) * time.Microsecond)
			p.logf("wait")
		case a < 9:
			l := rng.IntN(2)
			down[l] = !down[l]
			b.link(l).SetLinkUp(!down[l])
			if down[l] {
				st.flapped = true
			}
			p.logf("link%d=%v", l, !down[l])
		default:
			if s := f.State(); (s == fence.Withholding || s == fence.Notifying) && rng.IntN(3) == 0 {
				if err := f.Abort(errors.New("caller gave up on the path")); err != nil {
					p.failf("abort in %v: %v", s, err)
				}
				st.aborted = true
				p.logf("abort(%v)", s)
			}
		}
	}
	for l := range 2 {
		b.link(l).SetLinkUp(true)
		b.link(l).Faults(fabric.TX).SetLoss(0)
		b.link(l).Faults(fabric.RX).SetLoss(0)
	}
	// End with a signaled WR so every rung WQE of the new path retires.
	if s := f.State(); s != fence.Failed {
		pending := s != fence.Done
		w := p.cas(nw, p.seq, true)
		if err := f.Post([]verbs.SendWR{w}); err != nil {
			p.failf("final post in %v: %v", s, err)
		}
		if pending {
			withheld = append(withheld, w.WRID)
		}
		p.seq++
	}

	// Drive until the fence has settled and no rung WQE is outstanding on either path.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.drive(f, &st)
		s := f.State()
		if (s == fence.Done || s == fence.Failed) && !rungOutstanding(b.snd[old].qp) && !rungOutstanding(b.snd[nw].qp) {
			break
		}
		if time.Now().After(deadline) {
			p.failf("round did not settle: fence %v", s)
		}
		time.Sleep(20 * time.Microsecond)
	}
	var rbuf [16]verbs.WC
	for _, cq := range []*provider.CQ{b.rcv[0].cq, b.rcv[1].cq} {
		for len(poll(t, cq, rbuf[:])) > 0 {
		}
	}

	// The checks.
	e := binary.NativeEndian.Uint64(b.rbuf.Bytes()[ctrOff:])
	p.logf("counter=%d start=%d seq=%d fence=%v", e, start, p.seq, f.State())
	if e < start || e > p.seq {
		p.failf("counter %d outside [%d, %d]", e, start, p.seq)
	}
	for k := start; k < p.seq; k++ {
		switch v := p.result(k); {
		case v == k && k >= e:
			p.failf("WR %d executed in order but the counter stopped at %d", k, e)
		case v != k && v != sentinel:
			p.failf("WR %d saw counter %d: executed out of order or twice", k, v)
		}
	}
	failed := f.State() == fence.Failed
	if !failed && st.errWCs == 0 {
		if e != p.seq {
			p.failf("clean round: counter %d, %d WRs posted", e, p.seq)
		}
	} else if !st.flapped && !st.aborted && !st.badFence {
		p.failf("unexplained failure: fence %v (%v), %d error completions", f.State(), f.Err(), st.errWCs)
	}
	if st.badFence && !st.aborted {
		if !failed || !errors.Is(f.Err(), fence.ErrFenceWR) {
			p.failf("bad fence WR: fence %v, err %v", f.State(), f.Err())
		}
		if !st.flapped && e != start+uint64(nOld)-1 {
			p.failf("bad fence WR: counter %d, want %d (every old WR before it)", e, start+uint64(nOld)-1)
		}
	}
	got := f.Withheld(nil)
	if failed {
		ids := make([]uint64, len(got))
		for i, w := range got {
			ids[i] = w.WRID
			if k := w.WRID &^ (1 << 32); p.result(k) != sentinel || k < e {
				p.failf("withheld WR %d executed", k)
			}
		}
		if !slices.Equal(ids, withheld) {
			p.failf("withheld listed %x, posted while pending %x", ids, withheld)
		}
	} else if len(got) != 0 {
		p.failf("done fence lists withheld %+v", got)
	}

	if st.flapped {
		p.flaps++
	}
	if st.errWCs > 0 {
		p.errRounds++
	}
	if failed || st.errWCs > 0 {
		// What the failover layer would do after a failed fence: both paths come back
		// through RESET; the counter says where the stream stands.
		b.connect(t, 0)
		b.connect(t, 1)
		p.seq = e
		p.cur = old
	} else {
		p.cur = nw
	}
	if err := f.Reset(); err != nil {
		p.failf("reset: %v", err)
	}
}

// drive polls both send CQs once, handing every completion to f.
func (p *prop) drive(f *fence.Fence, st *roundState) {
	var buf [32]verbs.WC
	for _, s := range p.b.snd {
		for _, w := range poll(p.t, s.cq, buf[:]) {
			if w.Status != verbs.WCSuccess {
				st.errWCs++
			}
			if _, err := f.HandleWC(&w); err != nil {
				p.logf("fence-err(%v)", w.Status)
			}
		}
	}
}

func rungOutstanding(q *provider.QP) bool {
	for _, w := range q.OutstandingSends(nil) {
		if w.Rung {
			return true
		}
	}
	return false
}
