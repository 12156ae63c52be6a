package failover

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestManyStaleReceives: a receiver that keeps 300 receives posted (perftest's ib_send_bw
// keeps 512) leaves them stale on its backup QP when its receive side recovers; the next
// fallback must tell the peer to consume all of them with fillers. The notification once
// carried the stale count in 8 bits and refused a second fallback with more than 255.
func TestManyStaleReceives(t *testing.T) {
	const nrecv, msg = 300, 16
	e := newEnvWith(t, 2048, recoverOpts)
	a, b := e.pairs(t, 1, verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 512, MaxSendSGE: 1, MaxRecvSGE: 1})
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	base := bufSize / 2
	for i := range nrecv {
		if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{hb.mr.SGE(base+i*msg, msg)}}}); err != nil {
			t.Fatal(err)
		}
	}
	seq := 0
	deadline := time.Now().Add(30 * time.Second)
	send := func() {
		t.Helper()
		binary.LittleEndian.PutUint64(ha.buf.Bytes()[seq*msg:], uint64(seq))
		w := verbs.SendWR{WRID: uint64(seq), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(seq*msg, msg)}}
		if err := qa.PostSend([]verbs.SendWR{w}); err != nil {
			t.Fatalf("send %d: %v", seq, err)
		}
		for _, p := range []*poller{{t: t, cq: ha.cq}, {t: t, cq: hb.cq}} {
			ws := p.next(deadline)
			if len(ws) != 1 || ws[0].Status != verbs.WCSuccess || ws[0].WRID != uint64(seq) {
				t.Fatalf("message %d: completions %+v: %s", seq, ws, e.describe(qa, qb))
			}
		}
		if got := binary.LittleEndian.Uint64(hb.buf.Bytes()[base+seq*msg:]); got != uint64(seq) {
			t.Fatalf("message %d landed as %d", seq, got)
		}
		seq++
	}
	send()
	e.linkDown(0)
	send() // first fallback: B's 299 receives move to its backup QP
	e.linkUp(0)
	waitFor(t, "both QPs back to Default", func() bool { return allDefault(qa, qb) }, func() string { return e.describe(qa, qb) })
	// B's receives came back to the default QP and stay posted on the backup too, stale.
	e.linkDown(0)
	send() // second fallback: B reports 298 stale receives, A consumes them with fillers
	send()
	if sa, sb := ha.ctx.Stats(), hb.ctx.Stats(); sa.Refused+sb.Refused != 0 || sa.Fillers < nrecv-3 {
		t.Fatalf("second fallback: A %+v B %+v", sa, sb)
	}
}
