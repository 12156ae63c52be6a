package failover

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestApplicationModifyErr: the application's own Modify to ERR stops the QP as without SHIFT
// (appstop.go): what it had outstanding completes with WR_FLUSH_ERR, nothing falls back or
// runs on a backup, later posts fail (ErrQPState, or a flush) and Query says ERR. On the
// default NIC with nothing outstanding (the next post fell back), with a SEND waiting for the
// peer's receive and a receive of its own outstanding (their flushes were taken for a failure
// and the SEND was reposted on the backup), and on the backup after SwitchToBackup (the backup
// QP ran on; Query said ERR of the running QP before too), and on the default NIC after a
// switch there and back, where SHIFT's control RECV waits on the default QP for the peer's
// recovery notification: its flush is SHIFT's, not the application's (simulation seed 29616
// gave it to the application, after the QP's destroy). The peer's next send on the default
// NIC fails as it would without SHIFT.
func TestApplicationModifyErr(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		outstanding, onBk, recovered bool
		to                           verbs.QPState
	}{
		{"default/idle", false, false, false, verbs.QPStateErr}, {"default/outstanding", true, false, false, verbs.QPStateErr},
		{"backup/outstanding", true, true, false, verbs.QPStateErr}, {"default/reset", true, false, false, verbs.QPStateReset},
		{"recovered/outstanding", true, false, true, verbs.QPStateErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, 256, func(h int, o *Options) {
				o.ProbeInterval = time.Hour
				if tc.recovered && h == 0 {
					recoverOpts(h, o) // SwitchToDefault's probes; the peer's sends stay on the backup
				}
			})
			as, bs := e.pairs(t, 1, smallCap)
			a, b := as[0], bs[0]
			ha := e.hosts[0]
			if tc.onBk {
				if err := a.SwitchToBackup(); err != nil {
					t.Fatal(err)
				}
				// The switch's round ends on the peer's reply, after the peer moved: its
				// fallback is counted (and the default QP reset) only then.
				waitFor(t, "both on the backup, the switch's round over", func() bool {
					return b.SendState() == SendFallback && ha.ctx.Stats().Fallbacks == 1
				}, func() string { return e.describe(a, b) })
			}
			if tc.recovered {
				if err := a.SwitchToBackup(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "both on the backup", func() bool { return allFallback(a, b) && ha.ctx.Stats().Fallbacks == 1 },
					func() string { return e.describe(a, b) })
				a.SwitchToDefault()
				waitFor(t, "the sends back on the default NIC, the control RECV there for the peer's notification", func() bool {
					return a.SendState() == SendDefault && a.RecvState() != RecvDefault
				}, func() string { return e.describe(a, b) })
			}
			if got, err := a.Query(verbs.QPAttrState); err != nil || got.State != verbs.QPStateRTS {
				t.Fatalf("query of the running QP: state %v, %v; want RTS", got.State, err)
			}
			var want []uint64
			if tc.outstanding {
				// b posts no receive: the SEND waits on RNR (rnr_retry 7) until the flush.
				if err := a.PostRecv([]verbs.RecvWR{{WRID: 5, SGL: []verbs.SGE{ha.mr.SGE(4096, 64)}}}); err != nil {
					t.Fatal(err)
				}
				if err := a.PostSend([]verbs.SendWR{{WRID: 9, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
					t.Fatal(err)
				}
				if tc.to == verbs.QPStateErr {
					want = []uint64{5, 9} // RESET drops them without completions
				}
			}
			falls := e.hosts[0].ctx.Stats().Fallbacks
			if err := a.Modify(&verbs.QPAttr{State: tc.to}, verbs.QPAttrState); err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, w := range waitN(t, ha.cq, len(want)) {
				if w.Status != verbs.WCWRFlushErr {
					t.Fatalf("completion %+v, want WR_FLUSH_ERR; %s", w, e.describe(a, b))
				}
				got = append(got, w.WRID)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("flushed wr_ids %v, want %v", got, want)
			}
			// A later post fails: ErrQPState, or, left in the inbox while another goroutine of
			// SHIFT's held the QP's mutex for a moment, a flush completion (as a QP in ERR
			// flushes what is posted on it).
			refused := func(what string, err error, wrid uint64) {
				t.Helper()
				if errors.Is(err, verbs.ErrQPState) {
					return
				}
				if err != nil {
					t.Fatalf("%s after the application's ERR: %v, want ErrQPState", what, err)
				}
				if w := waitN(t, ha.cq, 1)[0]; w.WRID != wrid || w.Status != verbs.WCWRFlushErr {
					t.Fatalf("%s after the application's ERR: accepted, then %+v; want ErrQPState or a flush", what, w)
				}
			}
			refused("post_send", a.PostSend([]verbs.SendWR{{WRID: 10, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}), 10)
			refused("post_recv", a.PostRecv([]verbs.RecvWR{{WRID: 6, SGL: []verbs.SGE{ha.mr.SGE(4096, 64)}}}), 6)
			if got, err := a.Query(verbs.QPAttrState); err != nil || got.State != tc.to {
				t.Fatalf("query: state %v, %v; want %v", got.State, err, tc.to)
			}
			if st := e.hosts[0].ctx.Stats(); st.Fallbacks != falls || st.AppStops != 1 || st.AppErrors != 0 {
				t.Fatalf("stats after the application's %v: %d fallbacks more, %d stops, %d application errors; want 0, 1, 0; %s",
					tc.to, st.Fallbacks-falls, st.AppStops, st.AppErrors, e.describe(a, b))
			}
			expectNoMore(t, ha.cq)
			if tc.onBk {
				return
			}
			// The peer is not told: its next send fails as without SHIFT, once its own
			// fallback found this side stopped.
			hb := e.hosts[1]
			if err := b.PostSend([]verbs.SendWR{{WRID: 11, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{hb.mr.SGE(0, 64)}}}); err != nil {
				t.Fatal(err)
			}
			if w := waitN(t, hb.cq, 1)[0]; w.WRID != 11 || w.Status != verbs.WCRetryExcErr {
				t.Fatalf("the peer's send: %+v, want RETRY_EXC_ERR; %s", w, e.describe(a, b))
			}
		})
	}
}

// TestApplicationResetReconnect: a QP the application resets and connects to another peer QP
// runs as on the plain provider (appstop.go): its backup QP, still connected to the old
// peer's, is not used. Before, SwitchToBackup took it there, and its SEND and the new peer's
// receive completed flushed (after 12.7 s, both QPs failed).
func TestApplicationResetReconnect(t *testing.T) {
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.ProbeInterval = time.Hour })
	as, bs := e.pairs(t, 2, smallCap)
	a0, b1 := as[0], bs[1]
	ha, hb := e.hosts[0], e.hosts[1]
	for _, q := range []*QP{a0, b1} {
		if err := q.Modify(&verbs.QPAttr{State: verbs.QPStateReset}, verbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	aa, ab := e.attr, e.attr
	aa.GIDIndex, ab.GIDIndex = ha.gidIdx, hb.gidIdx
	ea := verbs.Endpoint{QPN: a0.QPN(), PSN: 0x500, GID: ha.gid}
	eb := verbs.Endpoint{QPN: b1.QPN(), PSN: 0x9500, GID: hb.gid}
	if err := verbs.Connect(a0, aa, ea, eb); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(b1, ab, eb, ea); err != nil {
		t.Fatal(err)
	}
	if err := b1.PostRecv([]verbs.RecvWR{{WRID: 5, SGL: []verbs.SGE{hb.mr.SGE(4096, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a0.SwitchToBackup(); err == nil {
		t.Fatal("SwitchToBackup of a QP the application reset and reconnected: nil error")
	}
	payload(ha.buf.Bytes()[:64], 7, 0)
	if err := a0.PostSend([]verbs.SendWR{{WRID: 9, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.WRID != 9 || w.Status != verbs.WCSuccess {
		t.Fatalf("send completion %+v; %s", w, e.describe(a0, b1))
	}
	if w := waitN(t, hb.cq, 1)[0]; w.WRID != 5 || w.Status != verbs.WCSuccess || w.QPNum != b1.QPN() || !bytes.Equal(hb.buf.Bytes()[4096:4096+64], ha.buf.Bytes()[:64]) {
		t.Fatalf("receive %+v; %s", w, e.describe(a0, b1))
	}
}

// TestPeerOfDestroyedQP: the application destroys its QP while the peer's goes on. The peer's
// next send fails on the default NIC, its fallback's notification reaches a context that no
// longer has the QP, which answers with a refusal (ctlep.go deliver): the peer's QP fails at
// once, as without SHIFT, instead of at its HandshakeTimeout (10 minutes here; the simulation
// found peers waiting their 2 s).
func TestPeerOfDestroyedQP(t *testing.T) {
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.ProbeInterval = time.Hour; o.HandshakeTimeout = 10 * time.Minute })
	as, bs := e.pairs(t, 2, smallCap) // the second pair keeps the control QPs in use
	a, b := as[0], bs[0]
	hb := e.hosts[1]
	if err := a.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := a.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := b.PostSend([]verbs.SendWR{{WRID: 11, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{hb.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, hb.cq, 1)[0]; w.WRID != 11 || w.Status != verbs.WCRetryExcErr {
		t.Fatalf("the peer's send: %+v, want RETRY_EXC_ERR", w)
	}
	if st := b.SendState(); st != SendFailed {
		t.Fatalf("the peer's QP in %v, want Failed", st)
	}
}

// TestApplicationModifyErrDeadNIC: on a default NIC that died (the QP runs on the backup),
// the application's Modify to ERR, which the dead device refuses with EIO, still stops the QP
// (appstop.go): it succeeds, Query says ERR, and a later post fails instead of going to the
// dead device's ring, where it would never complete (found by internal/sim, seed 1479 of the
// stop runs: the Modify returned EIO and the QP ran on).
func TestApplicationModifyErrDeadNIC(t *testing.T) {
	e := newEnvWith(t, 256, func(_ int, o *Options) { o.ProbeInterval = time.Hour })
	as, bs := e.pairs(t, 1, smallCap)
	a, b := as[0], bs[0]
	ha := e.hosts[0]
	e.cl.Hosts[0].Devices[0].NIC().Kill()
	waitFor(t, "the QP on the backup after DEVICE_FATAL", func() bool { return a.SendState() == SendFallback && b.SendState() == SendFallback },
		func() string { return e.describe(a, b) })
	if err := a.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatalf("modify_qp to ERR on a dead default NIC: %v", err)
	}
	if st, rs := a.SendState(), a.RecvState(); st != SendFailed || rs != RecvFailed {
		t.Fatalf("states %v/%v, want Failed", st, rs)
	}
	if got, err := a.Query(verbs.QPAttrState); err != nil || got.State != verbs.QPStateErr {
		t.Fatalf("query: %v, %v; want ERR", got.State, err)
	}
	err := a.PostSend([]verbs.SendWR{{WRID: 10, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}})
	if !errors.Is(err, verbs.ErrQPState) {
		t.Fatalf("post after the application's ERR on a dead NIC: %v, want ErrQPState", err)
	}
	if err := a.PostRecv([]verbs.RecvWR{{WRID: 6, SGL: []verbs.SGE{ha.mr.SGE(4096, 64)}}}); !errors.Is(err, verbs.ErrQPState) {
		t.Fatalf("post_recv after the application's ERR on a dead NIC: %v, want ErrQPState", err)
	}
}
