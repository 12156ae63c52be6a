package rc

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// A link that goes down in the middle of a 1 MiB WRITE leaves a prefix of the data at the
// responder; the requester gives up after retry_cnt retransmissions, i.e. after
// (retry_cnt+1) ACK timeouts, with RETRY_EXC_ERR, then flushes the rest.
func TestLinkDownMidWrite(t *testing.T) {
	const retry = 3
	e := newEnv(t, func(a, b *Config) { a.RetryCnt = retry; a.Timeout = 14 })
	const mib = 1 << 20
	const passed = 300 // packets that make it before the link goes down
	rec := &recorder{drop: func(n int, p *roce.Packet) bool { return n >= passed }}
	e.pair.A.SetDrop(rec.hook)
	mem := e.hb.register(1, 0, mib, AccessRemoteWrite)
	src := pattern(mib, 11)
	e.post(e.a, WorkRequest{Index: 0, Op: OpWrite, RKey: 1, Local: [][]byte{src}, Signaled: true})
	e.post(e.a, WorkRequest{Index: 1, Op: OpWrite, RKey: 1, Local: [][]byte{src[:64]}})
	moved := e.runTimers(100)
	wantSends(t, e.ha.sendC(),
		SendCompletion{Index: 0, Op: OpWrite, Status: StatusRetryExcErr, Signaled: true},
		SendCompletion{Index: 1, Op: OpWrite, Status: StatusWRFlushErr})
	st := e.a.Stats()
	if st.Timeouts != retry+1 || st.Retransmits != retry {
		t.Fatalf("%d timeouts, %d retransmissions; want %d and %d", st.Timeouts, st.Retransmits, retry+1, retry)
	}
	to := ackTimeout(14)
	if moved != (retry+1)*to {
		t.Fatalf("requester failed after %v of clock, want (retry_cnt+1) × %v = %v", moved, to, (retry+1)*to)
	}
	if !bytes.Equal(mem[:passed*1024], src[:passed*1024]) {
		t.Fatal("the delivered prefix is not at the responder")
	}
	if !bytes.Equal(mem[passed*1024:], make([]byte, mib-passed*1024)) {
		t.Fatal("bytes beyond the delivered prefix changed")
	}
	if e.a.State() != StateError || e.b.State() != StateRTS {
		t.Fatalf("states %v/%v, want ERR/RTS", e.a.State(), e.b.State())
	}
	if ea := e.ha.errs(); len(ea) != 1 || ea[0] != StatusRetryExcErr {
		t.Fatalf("QP errors %v", ea)
	}
}

// Losing every ACK after the data landed: the data is at the responder, the retransmissions are
// recognised as duplicates (not executed again), and the requester ends in RETRY_EXC_ERR.
func TestAckLostForGood(t *testing.T) {
	e := newEnv(t, func(a, b *Config) { a.RetryCnt = 2 })
	e.pair.B.SetDrop(func(p *roce.Packet) bool { return p.BTH.Opcode == roce.Acknowledge })
	d := make([]byte, 64)
	e.hb.postRecv(d)
	e.hb.postRecv(make([]byte, 64))
	e.post(e.a, WorkRequest{Op: OpSend, Local: [][]byte{pattern(64, 2)}})
	e.runTimers(100)
	if !bytes.Equal(d, pattern(64, 2)) || len(e.hb.recvC()) != 1 {
		t.Fatalf("data not landed once: %d receive completions", len(e.hb.recvC()))
	}
	wantSends(t, e.ha.sendC(), SendCompletion{Op: OpSend, Status: StatusRetryExcErr})
	if st := e.b.Stats(); st.Duplicates != 2 {
		t.Fatalf("responder saw %d duplicates, want 2 (one per retransmission)", st.Duplicates)
	}
}

// Losing one ACK: the retransmission is a duplicate, re-ACKed, and the WR completes once.
func TestAckLostOnce(t *testing.T) {
	e := newEnv(t, nil)
	drops := 1
	e.pair.B.SetDrop(func(p *roce.Packet) bool {
		if p.BTH.Opcode == roce.Acknowledge && drops > 0 {
			drops--
			return true
		}
		return false
	})
	e.hb.postRecv(make([]byte, 8000))
	e.hb.postRecv(make([]byte, 8000))
	e.post(e.a, WorkRequest{Op: OpSend, Local: [][]byte{pattern(5000, 2)}})
	e.settle()
	var moved time.Duration
	for len(e.ha.sendC()) == 0 {
		d, ok := e.clk.AdvanceToNext()
		if !ok {
			t.Fatal("no completion and no timer pending")
		}
		moved += d
		e.settle()
	}
	wantSends(t, e.ha.sendC(), SendCompletion{Op: OpSend, ByteLen: 5000})
	if rc := e.hb.recvC(); len(rc) != 1 {
		t.Fatalf("%d receive completions, want 1: a duplicate SEND was executed again", len(rc))
	}
	if st := e.a.Stats(); st.Timeouts != 1 || moved != ackTimeout(14) {
		t.Fatalf("timeouts %d after %v", st.Timeouts, moved)
	}
}

// A lost FETCH_ADD response: the retransmitted request is answered from the responder's
// replay buffer, so the add is applied once and the requester sees the original value.
func TestAtomicExecutedOnce(t *testing.T) {
	e := newEnv(t, nil)
	drops := 1
	e.pair.B.SetDrop(func(p *roce.Packet) bool {
		if p.BTH.Opcode == roce.AtomicAcknowledge && drops > 0 {
			drops--
			return true
		}
		return false
	})
	mem := e.hb.register(3, 0x8000, 64, AccessRemoteAtomic)
	binary.NativeEndian.PutUint64(mem[8:], 1000)
	res := make([]byte, 8)
	e.post(e.a, WorkRequest{Op: OpFetchAdd, RKey: 3, RemoteAddr: 0x8008, SwapAdd: 5, Local: [][]byte{res}})
	e.runTimers(100)
	wantSends(t, e.ha.sendC(), SendCompletion{Op: OpFetchAdd, ByteLen: 8})
	if v := binary.NativeEndian.Uint64(mem[8:]); v != 1005 {
		t.Fatalf("remote value %d, want 1005 (add applied once)", v)
	}
	if v := binary.NativeEndian.Uint64(res); v != 1000 {
		t.Fatalf("result %d, want the original 1000", v)
	}
	if st := e.b.Stats(); st.AtomicReplays != 1 || st.Duplicates != 1 {
		t.Fatalf("responder stats %+v, want one replay", st)
	}
}

// A lost READ response: the requester re-requests the missing part (a duplicate at the
// responder, executed again since READs are idempotent) and the data is complete.
func TestReadResponseLost(t *testing.T) {
	e := newEnv(t, nil)
	mem := e.hb.register(4, 0, 8192, AccessRemoteRead)
	copy(mem, pattern(8192, 4))
	dst := make([]byte, 6000)
	var rec recorder
	e.pair.A.SetDrop(rec.hook)
	e.post(e.a, WorkRequest{Op: OpRead, RKey: 4, Local: [][]byte{dst}})
	e.settle()
	if !bytes.Equal(dst, mem[:6000]) {
		t.Fatal("lossless READ wrong")
	}
	dropped := false
	e.pair.B.SetDrop(func(p *roce.Packet) bool {
		if !dropped && p.BTH.Opcode == roce.ReadResponseMiddle {
			dropped = true
			return true
		}
		return false
	})
	dst2 := make([]byte, 6000)
	e.post(e.a, WorkRequest{Index: 1, Op: OpRead, RKey: 4, Local: [][]byte{dst2}})
	e.runTimers(100)
	if !dropped || !bytes.Equal(dst2, mem[:6000]) {
		t.Fatalf("READ after a lost response: dropped=%v, data equal=%v", dropped, bytes.Equal(dst2, mem[:6000]))
	}
	wantSends(t, e.ha.sendC(), SendCompletion{Op: OpRead, ByteLen: 6000}, SendCompletion{Index: 1, Op: OpRead, ByteLen: 6000})
	if st := e.b.Stats(); st.Duplicates != 1 {
		t.Fatalf("responder duplicates %d, want 1 (the re-requested READ)", st.Duplicates)
	}
	// The re-request asked only for what was missing (from the lost response on).
	pk := rec.packets()
	last := pk[len(pk)-1]
	if last.BTH.Opcode != roce.ReadRequest || last.RETH.DMALen != 6000-1024 || last.RETH.VA != 1024 || last.BTH.PSN != 107 {
		t.Fatalf("re-request %+v", last)
	}
}

// A lost middle packet makes the responder NAK the gap once (PSN sequence error) and the
// requester retransmits at once, without waiting for a timeout.
func TestSequenceErrorNAK(t *testing.T) {
	e := newEnv(t, nil)
	rec := &recorder{drop: func(n int, p *roce.Packet) bool { return n == 2 }}
	e.pair.A.SetDrop(rec.hook)
	mem := e.hb.register(1, 0, 8192, AccessRemoteWrite)
	src := pattern(8192, 7)
	e.post(e.a, WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{src}})
	e.settle()
	wantSends(t, e.ha.sendC(), SendCompletion{Op: OpWrite, ByteLen: 8192})
	if !bytes.Equal(mem, src) {
		t.Fatal("data mismatch after recovery")
	}
	sa, sb := e.a.Stats(), e.b.Stats()
	if sa.Timeouts != 0 || sa.SeqNAKsReceived != 1 || sb.SeqNAKsSent != 1 || sa.Retransmits != 1 {
		t.Fatalf("requester %+v responder %+v", sa, sb)
	}
	// Go-back-N: packets 0,1,[2 lost],3..7 then 2..7 again.
	pk := rec.packets()
	if len(pk) != 8+6 || pk[8].BTH.PSN != 102 || pk[8].BTH.Opcode != roce.WriteMiddle {
		t.Fatalf("%d packets, retransmission starts %+v", len(pk), pk[8].BTH)
	}
}

// No receive posted: RNR NAK, the requester waits the RNR timer and tries again.
func TestRNR(t *testing.T) {
	t.Run("recovers when a receive is posted", func(t *testing.T) {
		e := newEnv(t, func(a, b *Config) { b.MinRNRTimer = 14; a.RNRRetry = 3 })
		e.post(e.a, WorkRequest{Op: OpSend, Local: [][]byte{pattern(100, 1)}})
		e.settle()
		if st := e.b.Stats(); st.RNRNAKsSent != 1 {
			t.Fatalf("RNR NAKs %d", st.RNRNAKsSent)
		}
		d := make([]byte, 100)
		e.hb.postRecv(d)
		d0, ok := e.clk.AdvanceToNext()
		if !ok || d0 != RNRDelay(14) || RNRDelay(14) != 1280*time.Microsecond {
			t.Fatalf("RNR wait %v, want %v", d0, RNRDelay(14))
		}
		e.settle()
		wantSends(t, e.ha.sendC(), SendCompletion{Op: OpSend, ByteLen: 100})
		if !bytes.Equal(d, pattern(100, 1)) {
			t.Fatal("payload")
		}
	})
	t.Run("rnr_retry exhausted", func(t *testing.T) {
		e := newEnv(t, func(a, b *Config) { a.RNRRetry = 2 })
		e.post(e.a, WorkRequest{Op: OpSend, Local: [][]byte{pattern(100, 1)}})
		e.post(e.a, WorkRequest{Index: 1, Op: OpSend})
		e.runTimers(100)
		wantSends(t, e.ha.sendC(), SendCompletion{Op: OpSend, Status: StatusRNRRetryExcErr}, SendCompletion{Index: 1, Op: OpSend, Status: StatusWRFlushErr})
		if st := e.a.Stats(); st.RNRNAKsReceived != 3 {
			t.Fatalf("%d RNR NAKs, want rnr_retry+1 = 3", st.RNRNAKsReceived)
		}
	})
	t.Run("multi-packet SEND waits out RNR without using retry_cnt", func(t *testing.T) {
		e := newEnv(t, func(a, b *Config) { a.RNRRetry = 7; a.RetryCnt = 1 })
		e.post(e.a, WorkRequest{Op: OpSend, Local: [][]byte{pattern(5000, 4)}})
		e.settle()
		for range 20 {
			e.clk.AdvanceToNext()
			e.settle()
		}
		if len(e.ha.sendC()) != 0 || e.a.State() != StateRTS {
			t.Fatalf("requester gave up: %+v", e.ha.sendC())
		}
		if sb := e.b.Stats(); sb.SeqNAKsSent != 0 || sb.RNRNAKsSent < 10 {
			t.Fatalf("responder stats %+v: the rest of an RNR-NAKed message must be dropped silently", sb)
		}
		d := make([]byte, 5000)
		e.hb.postRecv(d)
		e.runTimers(10)
		wantSends(t, e.ha.sendC(), SendCompletion{Op: OpSend, ByteLen: 5000})
		if !bytes.Equal(d, pattern(5000, 4)) {
			t.Fatal("payload")
		}
	})
	t.Run("rnr_retry 7 is infinite", func(t *testing.T) {
		e := newEnv(t, func(a, b *Config) { a.RNRRetry = 7 })
		e.hb.register(1, 0, 64, AccessRemoteWrite)
		e.post(e.a, WorkRequest{Op: OpWriteImm, RKey: 1, Local: [][]byte{pattern(64, 1)}, Imm: 3})
		e.settle()
		for range 50 {
			e.clk.AdvanceToNext()
			e.settle()
		}
		if len(e.ha.sendC()) != 0 || e.a.State() != StateRTS {
			t.Fatal("requester gave up with rnr_retry 7")
		}
		e.hb.postRecv()
		e.runTimers(10)
		wantSends(t, e.ha.sendC(), SendCompletion{Op: OpWriteImm, ByteLen: 64})
		if rc := e.hb.recvC(); len(rc) != 1 || rc[0].Imm != 3 || rc[0].Op != OpWriteImm {
			t.Fatalf("receive %+v", rc)
		}
	})
}

// max_rd_atomic bounds outstanding READ/atomics; a fenced WR waits for earlier READs.
func TestMaxRDAtomicAndFence(t *testing.T) {
	e := newEnv(t, func(a, b *Config) { a.MaxRDAtomic = 1 })
	rec := &recorder{}
	e.pair.A.SetDrop(rec.hook)
	mem := e.hb.register(1, 0, 4096, AccessRemoteRead|AccessRemoteWrite)
	copy(mem, pattern(4096, 8))
	r1, r2 := make([]byte, 100), make([]byte, 100)
	e.post(e.a, WorkRequest{Index: 0, Op: OpRead, RKey: 1, Local: [][]byte{r1}})
	e.post(e.a, WorkRequest{Index: 1, Op: OpRead, RKey: 1, RemoteAddr: 100, Local: [][]byte{r2}})
	if n := len(rec.packets()); n != 1 {
		t.Fatalf("%d requests in flight with max_rd_atomic 1, want 1", n)
	}
	e.settle()
	if n := len(rec.packets()); n != 2 || !bytes.Equal(r2, mem[100:200]) {
		t.Fatalf("%d requests after the first READ completed", n)
	}
	// Unfenced WRITE after a READ goes out at once; a fenced one waits for the READ.
	e.post(e.a, WorkRequest{Index: 2, Op: OpRead, RKey: 1, Local: [][]byte{r1}})
	e.post(e.a, WorkRequest{Index: 3, Op: OpWrite, RKey: 1, RemoteAddr: 2000, Local: [][]byte{pattern(10, 1)}})
	if n := len(rec.packets()); n != 4 {
		t.Fatalf("unfenced WRITE held back: %d packets", n)
	}
	e.settle()
	e.post(e.a, WorkRequest{Index: 4, Op: OpRead, RKey: 1, Local: [][]byte{r1}})
	e.post(e.a, WorkRequest{Index: 5, Op: OpWrite, RKey: 1, RemoteAddr: 3000, Local: [][]byte{pattern(10, 2)}, Fence: true})
	if n := len(rec.packets()); n != 5 {
		t.Fatalf("fenced WRITE sent before the READ completed: %d packets", n)
	}
	e.settle()
	if n := len(rec.packets()); n != 6 || !bytes.Equal(mem[3000:3010], pattern(10, 2)) {
		t.Fatalf("fenced WRITE not executed after the READ: %d packets", n)
	}
	if s := e.ha.sendC(); len(s) != 6 {
		t.Fatalf("completions %+v", s)
	}
}

// Random loss and reordering in both directions on a mixed workload: everything completes successfully, in
// order, with the right data, and every FETCH_ADD is applied exactly once.
func TestRandomLoss(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("seed %d", seed)
				}
			}()
			rnd := rand.New(rand.NewPCG(seed, 99))
			e := newEnv(t, func(a, b *Config) { a.PathMTU = 256; a.RetryCnt = 7; b.PathMTU = 256 })
			loss := rand.New(rand.NewPCG(seed, 7))
			drop := func(p *roce.Packet) bool { return loss.IntN(100) < 8 }
			e.pair.A.SetDrop(drop)
			e.pair.B.SetDrop(drop)
			// Swap neighbours now and then: a multipath fabric reorders.
			reorder := func(b []*roce.Packet) {
				for i := 0; i+1 < len(b); i++ {
					if loss.IntN(100) < 5 {
						b[i], b[i+1] = b[i+1], b[i]
					}
				}
			}
			e.pair.A.SetReorder(reorder)
			e.pair.B.SetReorder(reorder)
			mem := e.hb.register(1, 0, 1<<16, AccessRemoteRead|AccessRemoteWrite|AccessRemoteAtomic)
			const counter = 1<<16 - 8
			var adds uint64
			type readCheck struct {
				dst  []byte
				want []byte
			}
			var reads []readCheck
			var sent [][]byte
			n := 60
			for i := range n {
				wr := WorkRequest{Index: uint16(i), RKey: 1}
				switch rnd.IntN(4) {
				case 0:
					data := pattern(rnd.IntN(3000), byte(i))
					off := uint64(i) * 512
					wr.Op, wr.Local, wr.RemoteAddr = OpWrite, [][]byte{data}, off%(1<<15)
					// Later READs check against a shadow; keep WRITEs and READs in separate halves.
				case 1:
					data := pattern(rnd.IntN(2000), byte(i))
					e.hb.postRecv(make([]byte, 2000))
					sent = append(sent, data)
					wr.Op, wr.Local = OpSend, [][]byte{data}
				case 2:
					add := uint64(rnd.IntN(1000))
					adds += add
					wr.Op, wr.Local, wr.RemoteAddr, wr.SwapAdd = OpFetchAdd, [][]byte{make([]byte, 8)}, counter, add
				default:
					l := rnd.IntN(3000)
					off := 1<<15 + rnd.IntN(1<<14)
					dst := make([]byte, l)
					reads = append(reads, readCheck{dst, mem[off : off+l]})
					wr.Op, wr.Local, wr.RemoteAddr = OpRead, [][]byte{dst}, uint64(off)
				}
				e.post(e.a, wr)
			}
			copy(mem[1<<15:], pattern(1<<15-8, 77)) // READ source, never written
			for i := 0; i < 2000 && len(e.ha.sendC()) < n; i++ {
				e.settle()
				if len(e.ha.sendC()) < n {
					e.clk.AdvanceToNext()
				}
			}
			s := e.ha.sendC()
			if len(s) != n {
				t.Fatalf("%d of %d WRs completed; state %v, stats %+v", len(s), n, e.a.State(), e.a.Stats())
			}
			for i, c := range s {
				if c.Index != uint16(i) || c.Status != StatusSuccess {
					t.Fatalf("completion %d = %+v", i, c)
				}
			}
			if v := binary.NativeEndian.Uint64(mem[counter:]); v != adds {
				t.Fatalf("counter %d, want %d: an atomic was applied twice or not at all", v, adds)
			}
			for i, r := range reads {
				if !bytes.Equal(r.dst, r.want) {
					t.Fatalf("READ %d data mismatch", i)
				}
			}
			rc := e.hb.recvC()
			if len(rc) != len(sent) {
				t.Fatalf("%d receives completed, %d SENDs", len(rc), len(sent))
			}
			if st := e.a.Stats(); st.Retransmits == 0 {
				t.Fatalf("8%% loss caused no retransmission: %+v", st)
			}
		})
	}
}

// A WR posted while the timer of earlier, completed traffic is still pending gets a full ACK
// timeout, not what was left of the old one.
func TestTimeoutStartsAtFirstPacketAfterIdle(t *testing.T) {
	e := newEnv(t, nil)
	e.hb.register(1, 0, 64, AccessRemoteWrite)
	e.post(e.a, WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 8)}})
	e.settle()
	to := ackTimeout(14)
	e.clk.Advance(to / 2)
	e.pair.A.SetDown(true)
	e.post(e.a, WorkRequest{Index: 1, Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 8)}})
	e.clk.Advance(to/2 + to/4)
	if n := e.a.Stats().Timeouts; n != 0 {
		t.Fatalf("timeout %v after the packet was sent, before the %v ACK timeout", to*3/4, to)
	}
	e.clk.Advance(to / 4)
	if n := e.a.Stats().Timeouts; n != 1 {
		t.Fatalf("%d timeouts one ACK timeout after the packet, want 1", n)
	}
}

// The link comes back before retry_cnt is exhausted: the WRITE completes and the data is whole.
func TestLinkFlapRecovers(t *testing.T) {
	e := newEnv(t, func(a, b *Config) { a.RetryCnt = 3 })
	mem := e.hb.register(1, 0, 1<<18, AccessRemoteWrite)
	src := pattern(1<<18, 5)
	rec := &recorder{drop: func(n int, p *roce.Packet) bool { return n >= 100 && n < 400 }}
	e.pair.A.SetDrop(rec.hook)
	e.post(e.a, WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{src}})
	e.settle()
	for range 2 {
		e.clk.AdvanceToNext()
		e.settle()
	}
	e.runTimers(20)
	wantSends(t, e.ha.sendC(), SendCompletion{Op: OpWrite, ByteLen: 1 << 18})
	if !bytes.Equal(mem, src) {
		t.Fatal("data incomplete after the link came back")
	}
	if st := e.a.Stats(); st.Timeouts == 0 || st.Timeouts > 3 {
		t.Fatalf("timeouts %d, want 1..3", st.Timeouts)
	}
}

// The engine allocates only the packets it sends (request, payload, ACK) per small WRITE.
func TestWriteAllocations(t *testing.T) {
	e := newEnv(t, nil)
	e.hb.register(1, 0, 64, AccessRemoteWrite)
	wr := WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 64)}}
	h := &countHost{testHost: *newTestHost()}
	e.a.host = h
	allocs := testing.AllocsPerRun(2000, func() {
		if err := e.a.Post(&wr); err != nil {
			t.Fatal(err)
		}
		e.settle()
	})
	if allocs > 3 {
		t.Fatalf("%.1f allocations per 64-byte WRITE round trip, want at most 3 (packet, payload, ACK)", allocs)
	}
	if h.done != 2001 || h.bad != 0 {
		t.Fatalf("%d completions, %d bad", h.done, h.bad)
	}
}

// An atomic whose result has left the responder's replay buffer (max_dest_rd_atomic entries)
// is never executed again: its retransmissions are dropped and the requester fails, with the
// adds applied exactly once each.
func TestAtomicBeyondReplayBufferNotReexecuted(t *testing.T) {
	e := newEnv(t, func(a, b *Config) { b.MaxDestRDAtomic = 1; a.RetryCnt = 2 })
	e.pair.B.SetDrop(func(p *roce.Packet) bool { return p.BTH.Opcode == roce.AtomicAcknowledge && p.BTH.PSN == 100 })
	mem := e.hb.register(3, 0, 64, AccessRemoteAtomic)
	e.post(e.a, WorkRequest{Index: 0, Op: OpFetchAdd, RKey: 3, SwapAdd: 1, Local: [][]byte{make([]byte, 8)}})
	e.post(e.a, WorkRequest{Index: 1, Op: OpFetchAdd, RKey: 3, SwapAdd: 10, Local: [][]byte{make([]byte, 8)}})
	e.runTimers(100)
	if v := binary.NativeEndian.Uint64(mem); v != 11 {
		t.Fatalf("remote value %d, want 11: each add applied once", v)
	}
	wantSends(t, e.ha.sendC(),
		SendCompletion{Index: 0, Op: OpFetchAdd, Status: StatusRetryExcErr},
		SendCompletion{Index: 1, Op: OpFetchAdd, Status: StatusWRFlushErr})
	if st := e.b.Stats(); st.AtomicReplays != 3 || st.Duplicates != 6 {
		// Three resend rounds (one on the out-of-order response for the second atomic, two on
		// timeouts) each resend both atomics: the first is too old to replay and is dropped,
		// the second is replayed.
		t.Fatalf("responder stats %+v", st)
	}
}
