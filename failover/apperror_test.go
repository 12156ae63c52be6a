package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The application's own errors (issue 15): a bad key, address, length or access right fails
// on any NIC, so SHIFT must report it at once, exactly as the provider does, and leave the
// peer alone. Each case runs the same faulty work requests over SHIFT QPs and over plain
// provider QPs on the same emulated NICs and compares what both sides' applications see.

// errRig is one connected pair of QPs (the one the case breaks) and a second pair that must
// keep running, over one implementation (failover or the plain provider).
type errRig struct {
	cq           [2]verbs.CQ
	mr, localMR  [2]verbs.MR // localMR: local write only (no remote access)
	qp, other    [2]verbs.QP
	buf, rbuf    [2]*provider.Buffer
	closeAll     func()
	shiftQPs     [2]*QP // nil over the plain provider
	shiftContext [2]*Context
}

const (
	errBufSize = 1 << 16
	recvLen    = 64
)

// newErrRig builds the rig over ctxs, whose NICs are those of hosts (for their GIDs).
func newErrRig(t *testing.T, e *testEnv, ctxs [2]verbs.Context, hosts [2]*testHost, psn uint32) *errRig {
	t.Helper()
	r := &errRig{}
	var cleanups []func()
	r.closeAll = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	t.Cleanup(r.closeAll)
	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	var eps, oeps [2]verbs.Endpoint
	var pds [2]verbs.PD
	for h := range 2 {
		pd, err := ctxs[h].AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		pds[h] = pd
		cleanups = append(cleanups, func() { pd.Dealloc() })
		cq, err := ctxs[h].CreateCQ(verbs.CQInitAttr{CQE: 64})
		if err != nil {
			t.Fatal(err)
		}
		r.cq[h] = cq
		cleanups = append(cleanups, func() { cq.Destroy() })
		for _, b := range []**provider.Buffer{&r.buf[h], &r.rbuf[h]} {
			if *b, err = provider.NewBuffer(errBufSize); err != nil {
				t.Fatal(err)
			}
			bb := *b
			cleanups = append(cleanups, func() { bb.Free() })
		}
		if r.mr[h], err = pd.RegMR(r.buf[h].Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic); err != nil {
			t.Fatal(err)
		}
		if r.localMR[h], err = pd.RegMR(r.rbuf[h].Bytes(), verbs.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		m, lm := r.mr[h], r.localMR[h]
		cleanups = append(cleanups, func() { m.Dereg(); lm.Dereg() })
		for i, q := range []*verbs.QP{&r.qp[h], &r.other[h]} {
			if *q, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cp}); err != nil {
				t.Fatal(err)
			}
			qq := *q
			cleanups = append(cleanups, func() {
				// A QP left alive would go on reading the buffers freed after it.
				if err := qq.Destroy(); err != nil {
					t.Errorf("destroy QP %#x: %v", qq.QPN(), err)
				}
			})
			ep := verbs.Endpoint{QPN: qq.QPN(), PSN: psn + uint32(h)*0x8000 + uint32(i)*0x100, GID: hosts[h].gid}
			if i == 0 {
				eps[h] = ep
			} else {
				oeps[h] = ep
			}
		}
		if sq, ok := r.qp[h].(*QP); ok {
			r.shiftQPs[h] = sq
			r.shiftContext[h] = ctxs[h].(*Context)
		}
	}
	for h := range 2 {
		a := e.attr
		a.GIDIndex = hosts[h].gidIdx
		if err := verbs.Connect(r.qp[h], a, eps[h], eps[1-h]); err != nil {
			t.Fatal(err)
		}
		if err := verbs.Connect(r.other[h], a, oeps[h], oeps[1-h]); err != nil {
			t.Fatal(err)
		}
	}
	// SHIFT's backup QPs are connected before the error (the connects above are replayed on the backups in the background): a fallback would be possible, so none
	// happening is the classification's doing.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range r.shiftContext {
		if c != nil {
			if err := c.WaitShadow(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// describe is the SHIFT QPs' states and the contexts' counters (empty over the provider).
func (r *errRig) describe() string {
	if r.shiftQPs[0] == nil {
		return ""
	}
	s := ""
	for h, q := range r.shiftQPs {
		s += fmt.Sprintf("; host %d QP %#x %v/%v (%v), stats %+v", h, q.QPN(), q.SendState(), q.RecvState(), q.Err(), r.shiftContext[h].Stats())
	}
	return s
}

// seenWC is what an application sees of a completion.
type seenWC struct {
	WRID   uint64
	Status verbs.WCStatus
	QP     string // "test" or "other"
}

func (r *errRig) collect(t *testing.T, h, n int, deadline time.Time) []seenWC {
	t.Helper()
	var out []seenWC
	var wcs [16]verbs.WC
	for len(out) < n {
		k, err := r.cq[h].Poll(wcs[:])
		if err != nil {
			t.Fatalf("host %d: poll: %v", h, err)
		}
		for _, w := range wcs[:k] {
			which := "test"
			if w.QPNum == r.other[h].QPN() {
				which = "other"
			}
			out = append(out, seenWC{w.WRID, w.Status, which})
		}
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("host %d: %d of %d completions after the deadline: %+v%s", h, len(out), n, out, r.describe())
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return out
}

// appErrCase is one application error: post sends it on host 0's test QP (host 1 has two
// RECVs posted on its test QP), and wantA/wantB are what each side's application sees.
type appErrCase struct {
	name         string
	post         func(r *errRig) error
	wantA, wantB []seenWC
	postErr      bool // the post itself fails (bad arguments): nothing completes
}

func appErrCases() []appErrCase {
	flushB := []seenWC{{0xb1, verbs.WCWRFlushErr, "test"}, {0xb2, verbs.WCWRFlushErr, "test"}}
	write := func(r *errRig, rkey uint32, raddr uint64, sge verbs.SGE) error {
		return r.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{sge}, RemoteAddr: raddr, RKey: rkey}})
	}
	return []appErrCase{
		{name: "WRITE past the end of the peer's MR", // the responder refuses it: REM_ACCESS on the requester, ERR on the responder
			post: func(r *errRig) error {
				return write(r, r.mr[1].RKey(), r.mr[1].Addr()+errBufSize-8, r.mr[0].SGE(0, 64))
			},
			wantA: []seenWC{{0xa1, verbs.WCRemAccessErr, "test"}}, wantB: flushB},
		{name: "WRITE with a wrong rkey",
			post: func(r *errRig) error {
				return write(r, r.mr[1].RKey()^0x5a5a00, r.mr[1].Addr(), r.mr[0].SGE(0, 64))
			},
			wantA: []seenWC{{0xa1, verbs.WCRemAccessErr, "test"}}, wantB: flushB},
		{name: "WRITE to an MR without remote write",
			post: func(r *errRig) error {
				return write(r, r.localMR[1].RKey(), r.localMR[1].Addr(), r.mr[0].SGE(0, 64))
			},
			wantA: []seenWC{{0xa1, verbs.WCRemAccessErr, "test"}}, wantB: flushB},
		{name: "READ with a wrong rkey",
			post: func(r *errRig) error {
				return r.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{r.mr[0].SGE(0, 64)}, RemoteAddr: r.mr[1].Addr(), RKey: r.mr[1].RKey() ^ 0x5a5a00}})
			},
			wantA: []seenWC{{0xa1, verbs.WCRemAccessErr, "test"}}, wantB: flushB},
		{name: "SEND with a wrong lkey", // local: the requester fails alone, the peer sees nothing
			post: func(r *errRig) error {
				s := r.mr[0].SGE(0, 32)
				s.LKey ^= 0x5a5a00
				return r.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{s}}})
			},
			wantA: []seenWC{{0xa1, verbs.WCLocProtErr, "test"}}},
		{name: "SEND longer than the peer's RECV", // the receiver detects it: LOC_LEN there, REM_INV_REQ here
			post: func(r *errRig) error {
				return r.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{r.mr[0].SGE(0, 4*recvLen)}}})
			},
			wantA: []seenWC{{0xa1, verbs.WCRemInvReqErr, "test"}},
			wantB: []seenWC{{0xb1, verbs.WCLocLenErr, "test"}, {0xb2, verbs.WCWRFlushErr, "test"}}},
		{name: "post with more SGEs than the QP allows", // refused by the post, nothing runs
			post: func(r *errRig) error {
				s := r.mr[0].SGE(0, 8)
				return r.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{s, s, s, s}}})
			},
			postErr: true},
	}
}

// runAppErr runs c on r and returns what both applications saw and the time from the post to
// the requester's error completion.
func runAppErr(t *testing.T, r *errRig, c appErrCase) (a, b []seenWC, took time.Duration, postErr error) {
	t.Helper()
	for i, id := range []uint64{0xb1, 0xb2} {
		if err := r.qp[1].PostRecv([]verbs.RecvWR{{WRID: id, SGL: []verbs.SGE{r.mr[1].SGE(i*recvLen, recvLen)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.other[1].PostRecv([]verbs.RecvWR{{WRID: 0xc1, SGL: []verbs.SGE{r.mr[1].SGE(1024, recvLen)}}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	postErr = c.post(r)
	deadline := time.Now().Add(20 * time.Second)
	if postErr == nil {
		a = r.collect(t, 0, len(c.wantA), deadline)
		took = time.Since(start)
	}
	b = r.collect(t, 1, len(c.wantB), deadline)
	// The other pair runs on as before, on whatever NIC it used.
	if err := r.other[0].PostSend([]verbs.SendWR{{WRID: 0xc2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{r.mr[0].SGE(2048, 16)}}}); err != nil {
		t.Fatalf("other QP: post after the error: %v", err)
	}
	if got := r.collect(t, 0, 1, deadline); got[0] != (seenWC{0xc2, verbs.WCSuccess, "other"}) {
		t.Fatalf("other QP, sender: %+v", got)
	}
	if got := r.collect(t, 1, 1, deadline); got[0] != (seenWC{0xc1, verbs.WCSuccess, "other"}) {
		t.Fatalf("other QP, receiver: %+v", got)
	}
	return a, b, took, postErr
}

func TestApplicationErrorsNotFailedOver(t *testing.T) {
	for i, c := range appErrCases() {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, 64)
			var plainCtx [2]verbs.Context
			for h := range 2 {
				pc, err := provider.Open(e.device(2 * h))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { pc.Close() })
				plainCtx[h] = pc
			}
			shiftCtx := [2]verbs.Context{e.hosts[0].ctx, e.hosts[1].ctx}
			// Rounds alternate which goes first, so that neither gets the other's warm-up;
			// the first round's rigs are the ones checked below.
			var ptooks, stooks []time.Duration
			var plain, shift *errRig
			for round := range appErrRounds {
				p := newErrRig(t, e, plainCtx, e.hosts, 0x1000+uint32(i*appErrRounds+round)*0x10)
				s := newErrRig(t, e, shiftCtx, e.hosts, 0x2000+uint32(i*appErrRounds+round)*0x10)
				var ptook, stook time.Duration
				var pa, pb, sa, sb []seenWC
				var perr, serr error
				if round%2 == 0 {
					pa, pb, ptook, perr = runAppErr(t, p, c)
					sa, sb, stook, serr = runAppErr(t, s, c)
				} else {
					sa, sb, stook, serr = runAppErr(t, s, c)
					pa, pb, ptook, perr = runAppErr(t, p, c)
				}
				ptooks, stooks = append(ptooks, ptook), append(stooks, stook)
				if round == 0 {
					plain, shift = p, s
				}
				if c.postErr != (perr != nil) {
					t.Fatalf("plain provider: post error %v, want one: %v", perr, c.postErr)
				}
				if (perr == nil) != (serr == nil) || (perr != nil && !sameSentinel(perr, serr)) {
					t.Fatalf("post error: SHIFT %v, plain provider %v", serr, perr)
				}
				if !slices.Equal(pa, c.wantA) || !slices.Equal(pb, c.wantB) {
					t.Fatalf("the plain provider's completions are not the case's: sender %+v, receiver %+v", pa, pb)
				}
				if !slices.Equal(sa, pa) || !slices.Equal(sb, pb) {
					t.Fatalf("SHIFT: sender %+v, receiver %+v; the plain provider: sender %+v, receiver %+v", sa, sb, pa, pb)
				}
			}
			if !c.postErr {
				t.Logf("error completion after (median of %d) %v with SHIFT, %v with the plain provider",
					appErrRounds, median(stooks).Round(time.Microsecond), median(ptooks).Round(time.Microsecond))
			}
			wantApp := [2]uint64{}
			if len(c.wantA) > 0 {
				wantApp[0] = 1
			}
			if len(c.wantB) > 0 {
				wantApp[1] = 1
			}
			for h := range 2 {
				st := shift.shiftContext[h].Stats()
				if st.Fallbacks != 0 || st.Refused != 0 || st.Reposted != 0 || st.AppErrors != wantApp[h]*appErrRounds {
					t.Errorf("host %d: stats %+v, want no fallback, refusal or repost and %d application errors", h, st, wantApp[h])
				}
				if o := shift.other[h].(*QP); o.SendState() != SendDefault || o.RecvState() != RecvDefault {
					t.Errorf("host %d: the other QP is in %v/%v", h, o.SendState(), o.RecvState())
				}
			}
			if c.postErr || len(c.wantA) == 0 {
				return
			}
			// The broken QP answers later posts as the provider's does.
			perr := plain.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa2, Opcode: verbs.WRSend, SGL: []verbs.SGE{plain.mr[0].SGE(0, 8)}}})
			serr := shift.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa2, Opcode: verbs.WRSend, SGL: []verbs.SGE{shift.mr[0].SGE(0, 8)}}})
			if (perr == nil) != (serr == nil) || (perr != nil && !sameSentinel(perr, serr)) {
				t.Errorf("post on the failed QP: SHIFT %v, plain provider %v", serr, perr)
			}
		})
	}
}

// appErrRounds is how many times each case runs over each implementation.
const appErrRounds = 5

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// sameSentinel reports whether a and b wrap the same verbs sentinel error.
func sameSentinel(a, b error) bool {
	for _, s := range []error{verbs.ErrQPState, verbs.ErrInvalidArgument, verbs.ErrSQFull, verbs.ErrRQFull} {
		if errors.Is(a, s) {
			return errors.Is(b, s)
		}
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// FuzzFailureClassification checks the two invariants of the classification over failure ×
// side × QP history: an application error never causes a fallback or a repost and reaches
// both applications as the provider reports it; a network failure (SHIFT's own injected
// fault, retransmittable) never reaches the application while the fallback is safe. kind
// picks the failure (the application errors of appErrCases, or the injected fault), swap
// which host is the requester, warm whether the pair carried traffic first.
func FuzzFailureClassification(f *testing.F) {
	n := uint8(len(appErrCases()) + 1)
	for k := range n {
		f.Add(k, false, false)
		f.Add(k, true, true)
	}
	f.Fuzz(func(t *testing.T, kind uint8, swap, warm bool) {
		cases := appErrCases()
		kind %= n
		e := newEnv(t, 64)
		hosts := e.hosts
		req := 0
		if swap {
			hosts[0], hosts[1], req = hosts[1], hosts[0], 1
		}
		r := newErrRig(t, e, [2]verbs.Context{hosts[0].ctx, hosts[1].ctx}, hosts, 0x3000)
		if warm {
			if err := r.qp[1].PostRecv([]verbs.RecvWR{{WRID: 0xd1, SGL: []verbs.SGE{r.mr[1].SGE(4096, recvLen)}}}); err != nil {
				t.Fatal(err)
			}
			if err := r.qp[0].PostSend([]verbs.SendWR{{WRID: 0xd2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{r.mr[0].SGE(0, 8)}}}); err != nil {
				t.Fatal(err)
			}
			dl := time.Now().Add(20 * time.Second)
			if a, b := r.collect(t, 0, 1, dl), r.collect(t, 1, 1, dl); a[0].Status != verbs.WCSuccess || b[0].Status != verbs.WCSuccess {
				t.Fatalf("warm-up: %+v %+v", a, b)
			}
		}
		if int(kind) < len(cases) {
			c := cases[kind]
			a, b, _, perr := runAppErr(t, r, c)
			if c.postErr != (perr != nil) || !slices.Equal(a, c.wantA) || !slices.Equal(b, c.wantB) {
				t.Fatalf("%s: post error %v, sender %+v, receiver %+v; want %+v, %+v", c.name, perr, a, b, c.wantA, c.wantB)
			}
			for h, c := range r.shiftContext {
				if st := c.Stats(); st.Fallbacks+st.Reposted+st.Refused+st.Skipped != 0 {
					t.Fatalf("host %d (requester %d): an application error caused %+v", h, req, st)
				}
			}
			return
		}
		// The injected fault: a corrupted lkey on the default NIC, the correct WR on the backup.
		r.shiftContext[0].Inject(r.qp[0].QPN(), 1)
		c := appErrCase{
			post: func(r *errRig) error {
				return r.qp[0].PostSend([]verbs.SendWR{{WRID: 0xa1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{r.mr[0].SGE(0, 32)}}})
			},
			wantA: []seenWC{{0xa1, verbs.WCSuccess, "test"}}, wantB: []seenWC{{0xb1, verbs.WCSuccess, "test"}},
		}
		a, b, _, perr := runAppErr(t, r, c)
		if perr != nil || !slices.Equal(a, c.wantA) || !slices.Equal(b, c.wantB) {
			t.Fatalf("injected fault: post error %v, sender %+v, receiver %+v; want %+v, %+v", perr, a, b, c.wantA, c.wantB)
		}
		if st := r.shiftContext[0].Stats(); st.Fallbacks == 0 || st.AppErrors != 0 {
			t.Fatalf("injected fault: requester stats %+v, want a fallback and no application error", st)
		}
	})
}

// A peer whose QP failed by the application's own error answers a later fallback with a
// refusal: the side that started it fails at once, not at its handshake timeout (10 minutes
// here, longer than the guard: only the refusal can end the wait).
func TestFailedPeerRefusesFallback(t *testing.T) {
	e := newEnvWith(t, 256, func(h int, o *Options) { o.HandshakeTimeout = 10 * time.Minute })
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha := e.hosts[0]
	s := ha.mr.SGE(0, 32)
	s.LKey ^= 0x5a5a00
	if err := qa.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{s}}}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCLocProtErr {
		t.Fatalf("A: %+v, want LOC_PROT_ERR", w)
	}
	if qa.SendState() != SendFailed || e.hosts[0].ctx.Stats().AppErrors != 1 {
		t.Fatalf("A: state %v, stats %+v", qa.SendState(), e.hosts[0].ctx.Stats())
	}
	start := time.Now()
	if err := qb.SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B failed by A's refusal", func() bool { return qb.SendState() == SendFailed },
		func() string { return e.describe(qa, qb) })
	if !strings.Contains(fmt.Sprint(qb.Err()), "peer refused") {
		t.Fatalf("B: %v, want the peer's refusal", qb.Err())
	}
	t.Logf("B failed %v after it started the fallback", time.Since(start).Round(time.Microsecond))
}
