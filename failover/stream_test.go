package failover

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

type streamMode int

const (
	modeWrite streamMode = iota // NCCL Simple: data WRITEs, every 4th a WRITE_IMM flag
	modeSend                    // SEND/RECV, every other one signaled
	modeRead                    // READs of the peer's memory
)

func (m streamMode) String() string { return [...]string{"write", "send", "read"}[m] }

type stream struct {
	mode     streamMode
	msgs     int
	size     int
	failAt   int // fail after posting this many messages (-1: never)
	failHost int // whose default NIC goes down
	seed     uint64
	// at runs after posting that many messages (further failures).
	at map[int]func()
}

const slot = 8192

// runStream runs one stream from host 0 (qa) to host 1 (qb) and checks exactly-once,
// in-order delivery, the data, wr_ids and byte_lens; the application must see no error.
func runStream(t *testing.T, e *testEnv, qa, qb *QP, s stream) { runStreamTB(t, e, qa, qb, s) }

func runStreamTB(t testing.TB, e *testEnv, qa, qb *QP, s stream) {
	t.Helper()
	ha, hb := e.hosts[0], e.hosts[1]
	if s.msgs*slot > bufSize/2 {
		t.Fatalf("stream of %d messages does not fit", s.msgs)
	}
	deadline := time.Now().Add(60 * time.Second)
	recvDepth := int(qb.Cap().MaxRecvWR)
	// Sources: the sender's slots (WRITE/SEND) or the receiver's (READ).
	for i := range s.msgs {
		if s.mode == modeRead {
			payload(hb.buf.Bytes()[i*slot:i*slot+s.size], s.seed, uint64(i))
		} else {
			payload(ha.buf.Bytes()[i*slot:i*slot+s.size], s.seed, uint64(i))
		}
	}
	twoSided := func(i int) bool { return s.mode == modeSend || (s.mode == modeWrite && i%4 == 3) }
	nRecv := 0
	for i := range s.msgs {
		if twoSided(i) {
			nRecv++
		}
	}
	recvSGE := func(k int) []verbs.SGE {
		if s.mode == modeSend {
			return []verbs.SGE{hb.mr.SGE(bufSize/2+k*slot, slot)}
		}
		return nil
	}
	// Receiver: pre-post, then check every completion and repost.
	var wg sync.WaitGroup
	recvErr := make(chan error, 1)
	if nRecv > 0 {
		posted := 0
		for ; posted < min(recvDepth, nRecv); posted++ {
			if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(posted), SGL: recvSGE(posted)}}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &poller{t: t, cq: hb.cq}
			got := 0
			fail := func(f string, a ...any) {
				recvErr <- fmt.Errorf(f, a...)
			}
			lastImm := -1
			for got < nRecv {
				ws := p.next(deadline)
				if ws == nil {
					fail("receiver: timed out after %d of %d receives", got, nRecv)
					return
				}
				for _, w := range ws {
					if w.Status != verbs.WCSuccess {
						fail("receiver: error completion %+v after %d receives", w, got)
						return
					}
					if w.WRID != uint64(got) || w.QPNum != qb.QPN() {
						fail("receiver: completion %d has wr_id %d qpn %#x, want %d %#x", got, w.WRID, w.QPNum, got, qb.QPN())
						return
					}
					switch s.mode {
					case modeSend:
						b := hb.buf.Bytes()[bufSize/2+got*slot:]
						seq := binary.LittleEndian.Uint64(b)
						want := make([]byte, s.size)
						payload(want, s.seed, uint64(got))
						if w.ByteLen != uint32(s.size) || seq != uint64(got) || !bytes.Equal(b[:s.size], want) {
							fail("receiver: receive %d: byte_len %d, message seq %d (duplicate, gap or shifted buffer)", got, w.ByteLen, seq)
							return
						}
					case modeWrite:
						if w.Flags&verbs.WCFlagWithImm == 0 || int(w.Imm) <= lastImm || int(w.Imm)%4 != 3 {
							fail("receiver: notification %d has imm %d after %d", got, w.Imm, lastImm)
							return
						}
						lastImm = int(w.Imm)
						want := make([]byte, s.size)
						for i := 0; i <= lastImm; i++ {
							payload(want, s.seed, uint64(i))
							if !bytes.Equal(hb.buf.Bytes()[i*slot:i*slot+s.size], want) {
								fail("receiver: data of WRITE %d wrong when notification %d arrived", i, lastImm)
								return
							}
						}
					}
					if next := got + recvDepth; next < nRecv {
						if err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(next), SGL: recvSGE(next)}}); err != nil {
							fail("receiver: post_recv: %v", err)
							return
						}
					}
					got++
				}
			}
		}()
	}
	// Sender.
	signaled := func(i int) bool {
		switch s.mode {
		case modeWrite:
			return i%4 == 3 || i == s.msgs-1
		case modeSend:
			return i%2 == 1 || i == s.msgs-1
		}
		return true
	}
	var want []uint64
	for i := range s.msgs {
		if signaled(i) {
			want = append(want, uint64(i))
		}
	}
	p := &poller{t: t, cq: ha.cq}
	done, next := 0, 0 // signaled completions seen, messages posted
	lastDone := -1     // highest message known complete
	window := int(qa.Cap().MaxSendWR) - 8
	for done < len(want) {
		for next < s.msgs && next-lastDone <= window {
			i := next
			w := verbs.SendWR{WRID: uint64(i)}
			if signaled(i) {
				w.Flags = verbs.SendSignaled
			}
			switch s.mode {
			case modeWrite:
				w.Opcode = verbs.WRRDMAWrite
				if i%4 == 3 {
					w.Opcode, w.Imm = verbs.WRRDMAWriteWithImm, uint32(i)
				}
				w.SGL = []verbs.SGE{ha.mr.SGE(i*slot, s.size)}
				w.RemoteAddr, w.RKey = hb.mr.Addr()+uint64(i*slot), hb.mr.RKey()
			case modeSend:
				w.Opcode = verbs.WRSend
				w.SGL = []verbs.SGE{ha.mr.SGE(i*slot, s.size)}
			case modeRead:
				w.Opcode = verbs.WRRDMARead
				w.SGL = []verbs.SGE{ha.mr.SGE(bufSize/2+i*slot, s.size)}
				w.RemoteAddr, w.RKey = hb.mr.Addr()+uint64(i*slot), hb.mr.RKey()
			}
			if err := qa.PostSend([]verbs.SendWR{w}); err != nil {
				t.Fatalf("post_send %d: %v", i, err)
			}
			next++
			if next == s.failAt {
				e.linkDown(s.failHost)
			}
			if f := s.at[next]; f != nil {
				f()
			}
		}
		ws := p.next(deadline)
		if ws == nil {
			t.Fatalf("sender: timed out with %d of %d completions (send state %v)", done, len(want), qa.SendState())
		}
		for _, w := range ws {
			if w.Status != verbs.WCSuccess || w.QPNum != qa.QPN() {
				t.Fatalf("sender: completion %+v (%v) after %d", w, w.Status, done)
			}
			if w.WRID != want[done] {
				t.Fatalf("sender: completion %d has wr_id %d, want %d", done, w.WRID, want[done])
			}
			if s.mode == modeRead {
				i := int(w.WRID)
				wantB := make([]byte, s.size)
				payload(wantB, s.seed, uint64(i))
				if w.ByteLen != uint32(s.size) || !bytes.Equal(ha.buf.Bytes()[bufSize/2+i*slot:bufSize/2+i*slot+s.size], wantB) {
					t.Fatalf("sender: READ %d: byte_len %d or data wrong", i, w.ByteLen)
				}
			}
			lastDone = int(w.WRID)
			done++
		}
	}
	wg.Wait()
	select {
	case err := <-recvErr:
		t.Fatal(err)
	default:
	}
	// Nothing more may come: no duplicate completion on either side.
	var extra [4]verbs.WC
	for _, h := range e.hosts {
		if n, _ := h.cq.Poll(extra[:]); n != 0 {
			t.Fatalf("extra completions after the stream: %+v", extra[:n])
		}
	}
}

func TestStreams(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	for _, mode := range []streamMode{modeWrite, modeSend, modeRead} {
		for _, side := range []int{0, 1} {
			t.Run(fmt.Sprintf("%v/fail-host%d", mode, side), func(t *testing.T) {
				e := newEnv(t, 256)
				a, b := e.pairs(t, 1, cp)
				s := stream{mode: mode, msgs: 200, size: 4096, failAt: 100, failHost: side, seed: uint64(10*int(mode) + side)}
				runStream(t, e, a[0], b[0], s)
				if st := a[0].SendState(); st != SendFallback {
					t.Fatalf("sender state %v, want Fallback (err %v)", st, a[0].Err())
				}
				if a[0].SendTransitions(SendDefault, SendHandshake) != 1 || a[0].SendTransitions(SendHandshake, SendFallback) != 1 ||
					b[0].RecvTransitions(RecvDefault, RecvFallback) != 1 {
					t.Fatal("transitions not counted once each")
				}
				t.Logf("fallback latency %v; stats A %+v B %+v", a[0].FallbackLatency(), e.hosts[0].ctx.Stats(), e.hosts[1].ctx.Stats())
			})
		}
	}
}

func TestStreamNoFailure(t *testing.T) {
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, cp)
	runStream(t, e, a[0], b[0], stream{mode: modeSend, msgs: 150, size: 1000, failAt: -1, seed: 3})
	if a[0].SendState() != SendDefault || b[0].RecvState() != RecvDefault {
		t.Fatalf("states %v %v", a[0].SendState(), b[0].RecvState())
	}
	// query_qp at RTR and RTS kept what reconnecting the default QP needs.
	rtr, rts := a[0].QueriedAttrs()
	if rtr.DestQPN != b[0].QPN() || rtr.State != 2 || rts.State != 3 || rts.SQPSN != 0x100 || rts.Timeout != fastAttr.Timeout {
		t.Fatalf("queried attributes: RTR %+v RTS %+v", rtr, rts)
	}
}
