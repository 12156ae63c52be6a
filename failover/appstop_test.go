package failover

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestApplicationModifyErr: the application's own Modify to ERR stops the QP as without SHIFT
// (appstop.go): what it had outstanding completes with WR_FLUSH_ERR, nothing falls back or
// runs on a backup, later posts fail with ErrQPState and Query says ERR. On the default NIC
// with nothing outstanding (the next post fell back), with a SEND waiting for the peer's
// receive and a receive of its own outstanding (their flushes were taken for a failure and
// the SEND was reposted on the backup), and on the backup after SwitchToBackup (the backup
// QP ran on; Query said ERR of the running QP before too).
func TestApplicationModifyErr(t *testing.T) {
	for _, tc := range []struct {
		name              string
		outstanding, onBk bool
	}{{"default/idle", false, false}, {"default/outstanding", true, false}, {"backup/outstanding", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, 256, func(_ int, o *Options) { o.ProbeInterval = time.Hour })
			as, bs := e.pairs(t, 1, smallCap)
			a, b := as[0], bs[0]
			ha := e.hosts[0]
			if tc.onBk {
				if err := a.SwitchToBackup(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the peer on the backup", func() bool { return b.SendState() == SendFallback },
					func() string { return e.describe(a, b) })
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
				want = []uint64{5, 9}
			}
			falls := e.hosts[0].ctx.Stats().Fallbacks
			if err := a.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
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
			err := a.PostSend([]verbs.SendWR{{WRID: 10, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}})
			if !errors.Is(err, verbs.ErrQPState) {
				t.Fatalf("post after the application's ERR: %v, want ErrQPState; %s", err, e.describe(a, b))
			}
			if err := a.PostRecv([]verbs.RecvWR{{WRID: 6, SGL: []verbs.SGE{ha.mr.SGE(4096, 64)}}}); !errors.Is(err, verbs.ErrQPState) {
				t.Fatalf("post_recv after the application's ERR: %v, want ErrQPState", err)
			}
			if got, err := a.Query(verbs.QPAttrState); err != nil || got.State != verbs.QPStateErr {
				t.Fatalf("query: state %v, %v; want ERR", got.State, err)
			}
			if n := e.hosts[0].ctx.Stats().Fallbacks; n != falls {
				t.Fatalf("%d fallbacks after the application's ERR; %s", n-falls, e.describe(a, b))
			}
			var wc [4]verbs.WC
			if n, err := ha.cq.Poll(wc[:]); n != 0 || err != nil {
				t.Fatalf("more completions: %+v, %v", wc[:n], err)
			}
		})
	}
}
