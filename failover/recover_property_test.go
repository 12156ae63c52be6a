package failover

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRecoveryProperty: random interleavings of application posts (opcode mix, batch sizes,
// signaled or not, long unsignaled runs that make SHIFT fence by count), probe outcomes
// (probes racing a link that is still down) and link events, for seeded schedules: the
// receiver sees every two-sided message exactly once and in order, each WRITE_WITH_IMM finds
// every earlier WRITE's data in place, and the sender sees every signaled completion once,
// in order, without error. The seed is printed; SHIFT_TEST_SEED reruns one.
func TestRecoveryProperty(t *testing.T) {
	base := testSeed()
	for run := range 4 {
		seed := base + uint64(run)
		chaos := run%2 == 1
		t.Run(fmt.Sprintf("%d/chaos=%v", seed, chaos), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with SHIFT_TEST_SEED=%d", base)
				}
			}()
			propertyRun(t, seed, chaos)
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
	op     WROpcode
	sig    bool
	twoSeq int // index among two-sided messages (-1: one-sided)
}

func propertyRun(t *testing.T, seed uint64, chaotic bool) {
	rng := rand.New(rand.NewPCG(seed, 99))
	fenceWRs := 4 + rng.IntN(60)
	e := newEnvWith(t, 256, func(h int, o *Options) {
		recoverOpts(h, o)
		o.FenceAfterWRs = fenceWRs
	})
	cp := QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	const n = 3000
	// The schedule: both sides know it.
	msgs := make([]propMsg, n)
	two := 0
	sigGap := 0
	for i := range msgs {
		m := &msgs[i]
		switch r := rng.IntN(10); {
		case r < 4:
			m.op = WRRDMAWrite
		case r < 7:
			m.op = WRRDMAWriteWithImm
		default:
			m.op = WRSend
		}
		m.sig = rng.IntN(4) == 0 || sigGap >= 24 || i == n-1
		if rng.IntN(8) == 0 && sigGap < 24 {
			m.sig = false // runs without a signaled WR
		}
		if m.sig {
			sigGap = 0
		} else {
			sigGap++
		}
		m.twoSeq = -1
		if twoSided(m.op) {
			m.twoSeq = two
			two++
		}
		payload(ha.buf.Bytes()[i*propSlot:(i+1)*propSlot], seed, uint64(i))
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
	deadline := time.Now().Add(60 * time.Second)
	// Receiver.
	recvErr := make(chan error, 1)
	go func() {
		recvErr <- func() error {
			depth := int(qb.Cap().MaxRecvWR)
			sge := func(k int) []SGE { return []SGE{hb.mr.SGE(bufSize/2+(k%depth)*propSlot, propSlot)} }
			posted := 0
			for ; posted < min(depth, two); posted++ {
				if err := qb.PostRecv([]RecvWR{{WRID: uint64(posted), SGL: sge(posted)}}); err != nil {
					return err
				}
			}
			p := &poller{t: t, cq: hb.cq}
			got, lastMsg := 0, -1
			want := make([]byte, propSlot)
			for got < two {
				ws := p.next(deadline)
				if ws == nil {
					return fmt.Errorf("receiver: timed out after %d of %d (last message %d): %s\n%s\n%s", got, two, lastMsg, e.describe(qa, qb), qa.debugState(), qb.debugState())
				}
				for _, w := range ws {
					if w.Status != WCSuccess || w.WRID != uint64(got) {
						return fmt.Errorf("receiver: completion %d: %+v", got, w)
					}
					// The message this receive must hold: the next two-sided one.
					i := lastMsg + 1
					for msgs[i].twoSeq != got {
						i++
					}
					switch msgs[i].op {
					case WRSend:
						bb := hb.buf.Bytes()[bufSize/2+(got%depth)*propSlot:]
						payload(want, seed, uint64(i))
						if w.Opcode != WCRecv || w.ByteLen != propSlot || !bytes.Equal(bb[:propSlot], want) {
							return fmt.Errorf("receiver: receive %d (message %d): opcode %v byte_len %d seq %d", got, i, w.Opcode, w.ByteLen, binary.LittleEndian.Uint64(bb))
						}
					default:
						if w.Opcode != WCRecvRDMAWithImm || w.Imm != uint32(i) {
							return fmt.Errorf("receiver: receive %d: want WRITE_WITH_IMM of message %d, got %v imm %d", got, i, w.Opcode, w.Imm)
						}
						for j := lastMsg + 1; j <= i; j++ {
							if msgs[j].op == WRSend {
								continue
							}
							payload(want, seed, uint64(j))
							if !bytes.Equal(hb.buf.Bytes()[j*propSlot:(j+1)*propSlot], want) {
								return fmt.Errorf("receiver: WRITE %d not in place at WRITE_WITH_IMM %d", j, i)
							}
						}
					}
					lastMsg = i
					if next := got + depth; next < two {
						if err := qb.PostRecv([]RecvWR{{WRID: uint64(next), SGL: sge(next)}}); err != nil {
							return err
						}
					}
					got++
				}
			}
			return nil
		}()
	}()
	// Sender.
	var want []uint64
	for i, m := range msgs {
		if m.sig {
			want = append(want, uint64(i))
		}
	}
	p := &poller{t: t, cq: ha.cq}
	next, done, lastDone := 0, 0, -1
	window := int(qa.Cap().MaxSendWR) - 8
	// Until every message is posted and every signaled one completed: the schedule may end
	// with unsignaled WRs, which the receiver still waits for.
	for done < len(want) || next < n {
		for next < n && (next-lastDone <= window-4 || done == len(want)) {
			k := min(1+rng.IntN(4), n-next)
			batch := make([]SendWR, k)
			for j := range batch {
				i := next + j
				m := msgs[i]
				w := SendWR{WRID: uint64(i), Opcode: m.op, SGL: []SGE{ha.mr.SGE(i*propSlot, propSlot)}}
				if m.sig {
					w.Flags = SendSignaled
				}
				if m.op != WRSend {
					w.RemoteAddr, w.RKey = hb.mr.Addr+uint64(i*propSlot), hb.mr.RKey
				}
				if m.op == WRRDMAWriteWithImm {
					w.Imm = uint32(i)
				}
				batch[j] = w
			}
			if err := qa.PostSend(batch); err != nil {
				t.Fatalf("post_send at %d: %v (A: %v; B: %v): %s\n%s\n%s", next, err, qa.Err(), qb.Err(), e.describe(qa, qb), qa.debugState(), qb.debugState())
			}
			next += k
			// Pace the stream so that it spans several link cycles.
			time.Sleep(time.Duration(rng.IntN(2500)) * time.Microsecond)
		}
		if done == len(want) {
			continue
		}
		ws := p.next(deadline)
		if ws == nil {
			t.Fatalf("sender: timed out with %d of %d completions: %s", done, len(want), e.describe(qa, qb))
		}
		for _, w := range ws {
			if w.Status != WCSuccess || w.WRID != want[done] {
				t.Fatalf("sender: completion %d: %+v, want wr_id %d", done, w, want[done])
			}
			lastDone = int(w.WRID)
			done++
		}
	}
	// Keep polling, as an application does, until the receiver has everything: an error
	// completion of a trailing unsignaled WR (its link failed after it was posted) is how
	// SHIFT learns that it must be reposted.
	for wait := true; wait; {
		select {
		case err := <-recvErr:
			if err != nil {
				t.Fatal(err)
			}
			wait = false
		default:
			if ws := p.next(time.Now()); len(ws) > 0 {
				t.Fatalf("sender: completion after the last signaled one: %+v", ws)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(stop)
	<-f.done
	stop = make(chan struct{}) // for the deferred close
	f.done = make(chan struct{})
	close(f.done)
	if f.err != nil {
		t.Fatal(f.err)
	}
	t.Logf("%d messages, %d link cycles, fence after %d WRs; A %+v", n, f.count, fenceWRs, e.hosts[0].ctx.Stats())
}
