package failover

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// pingPong drives SEND ping-pong between qs[0] and qs[1] as perftest's ib_send_lat does:
// each side keeps depth receives posted and reposts one per message it receives, and each
// message is one signaled SEND. Messages carry their sequence number.
type pingPong struct {
	t     testing.TB
	e     *testEnv
	qs    [2]*QP
	depth int
	size  int
	seq   uint64
	next  [2]uint64 // the sequence number each side expects next
	slot  [2]int    // the next receive slot of each side
	wcs   [32]verbs.WC
}

func (p *pingPong) postRecv(side int) {
	h := p.e.hosts[side]
	off := bufSize/2 + (p.slot[side]%(2*p.depth))*p.size
	p.slot[side]++
	if err := p.qs[side].PostRecv([]verbs.RecvWR{{WRID: uint64(off), SGL: []verbs.SGE{h.mr.SGE(off, p.size)}}}); err != nil {
		p.t.Fatalf("side %d post_recv: %v; %s", side, err, p.e.describe(p.qs[0], p.qs[1]))
	}
}

// round sends one message from side s and waits, as ib_send_lat does, first for s's send
// completion (polling s's send CQ) and then for the other side to receive it (polling its
// receive CQ); it fails the test on an error completion or after 20 s. The other side's send
// CQ goes unpolled until its own next send, so SHIFT's completions there (its fillers) must
// fit its backup CQ by themselves.
func (p *pingPong) round(s int) {
	r := 1 - s
	hs := p.e.hosts[s]
	off := (int(p.seq) % 64) * p.size
	binary.LittleEndian.PutUint64(hs.buf.Bytes()[off:], p.seq)
	if err := p.qs[s].PostSend([]verbs.SendWR{{WRID: p.seq, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{hs.mr.SGE(off, p.size)}}}); err != nil {
		p.t.Fatalf("seq %d side %d post_send: %v; %s", p.seq, s, err, p.e.describe(p.qs[0], p.qs[1]))
	}
	deadline := time.Now().Add(20 * time.Second)
	for sent := false; !sent; {
		sent = p.poll(s, p.e.hosts[s].scq, deadline)
	}
	for got := false; !got; {
		got = p.poll(r, p.e.hosts[r].cq, deadline)
	}
	p.seq++
}

// poll polls side's cq once and checks what it returns against the ping-pong: a receive of
// the message side expects next (reposting its receive), or the send of message p.seq. It
// reports whether p.seq's receive or send was among them; it fails the test on an error
// completion or once deadline passed.
func (p *pingPong) poll(side int, cq *CQ, deadline time.Time) bool {
	n, err := cq.Poll(p.wcs[:])
	if err != nil {
		p.t.Fatalf("poll: %v", err)
	}
	done := false
	for _, w := range p.wcs[:n] {
		if w.Status != verbs.WCSuccess {
			p.t.Fatalf("seq %d: side %d completion %+v; %s", p.seq, side, w, p.e.describe(p.qs[0], p.qs[1]))
		}
		if w.Opcode == verbs.WCSend {
			done = done || w.WRID == p.seq
			continue
		}
		v := binary.LittleEndian.Uint64(p.e.hosts[side].buf.Bytes()[w.WRID:])
		if v != p.next[side] || int(w.ByteLen) != p.size {
			p.t.Fatalf("seq %d: side %d received message %d (%d bytes), want %d; %s", p.seq, side, v, w.ByteLen, p.next[side], p.e.describe(p.qs[0], p.qs[1]))
		}
		p.next[side] = v + 2
		done = true
		p.postRecv(side)
	}
	if !done && time.Now().After(deadline) {
		p.t.Fatalf("seq %d: nothing for side %d after 20 s; %s", p.seq, side, p.e.describe(p.qs[0], p.qs[1]))
	}
	return done
}

// TestPingPongFlap: SEND ping-pong with 512 receives posted on each side (ib_send_lat's
// pattern) while the default link of one host, then of the other, goes down and comes back.
// Each recovery leaves both sides' receives on their backup QPs (stale), and the next
// fallback's fillers must consume exactly those.
//
// The queues are perftest's: one send outstanding, a send CQ of one entry (ib_send_lat sizes
// it tx_depth), 512 receives on a receive CQ that holds them all.
func TestPingPongFlap(t *testing.T) {
	const depth = 512
	const downFor = 400 * time.Millisecond // several probes fail and start reset rounds
	e := newEnvWith(t, 2*depth, recoverOpts)
	cp := verbs.QPCap{MaxSendWR: 1, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}
	for _, h := range e.hosts {
		scq, err := as[*CQ](h.ctx.CreateCQ(verbs.CQInitAttr{CQE: 1}))
		if err != nil {
			t.Fatal(err)
		}
		h.scq = scq
	}
	a, b := e.pairs(t, 1, cp)
	p := &pingPong{t: t, e: e, qs: [2]*QP{a[0], b[0]}, depth: depth, size: 1024, next: [2]uint64{1, 0}}
	for side := range 2 {
		for range depth {
			p.postRecv(side)
		}
	}
	until := func(what string, cond func() bool) {
		for deadline := time.Now().Add(30 * time.Second); !cond(); {
			p.round(int(p.seq % 2))
			if time.Now().After(deadline) {
				t.Fatalf("cycle: not %s after 30 s; %s", what, e.describe(a[0], b[0]))
			}
		}
	}
	for range 20 {
		p.round(int(p.seq % 2))
	}
	// Each cycle takes the other host's link down a few rounds after the last one came back:
	// before the recovery finished, as a flapping link or a second fault does.
	for cycle, after := range []int{-1, 0, 1, 2, 3, 5, 8, 13} {
		h := cycle % 2
		t.Run(fmt.Sprintf("cycle%d-host%d-after%d", cycle, h, after), func(t *testing.T) {
			p.t = t
			e.linkDown(h)
			until("both on the backup", func() bool { return allFallback(a[0], b[0]) })
			for end := time.Now().Add(downFor); time.Now().Before(end); {
				p.round(int(p.seq % 2))
			}
			e.linkUp(h)
			if after < 0 {
				until("both back on the default NICs", func() bool { return allDefault(a[0], b[0]) })
				return
			}
			until("a side back on its default NIC", func() bool {
				return a[0].SendState() == SendDefault || b[0].SendState() == SendDefault
			})
			for range after {
				p.round(int(p.seq % 2))
			}
		})
		if t.Failed() {
			break
		}
	}
	until("both back on the default NICs", func() bool { return allDefault(a[0], b[0]) })
	t.Logf("%d messages; A %+v; B %+v", p.seq, e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats())
}
