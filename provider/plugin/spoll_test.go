package main

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// TestSharedPollMatchesGo: completions written into both QPs' CQs alike (requester CQEs for
// WQEs the two posted alike, responder CQEs for their receives in order, now and then an
// error or a completion of an unknown QP), polled from one CQ by the provider's Poll and from
// the other by C (spoll.c) and, for what C leaves (errors, unknown QPs), by the provider's
// Poll after it, as the plugin does: the same completions, and the same retirements,
// consumer index and doorbell record after every poll.
func TestSharedPollMatchesGo(t *testing.T) {
	r := seeded(t)
	s := newSpostQPs(t, false)
	sh := s.shares(t)
	sa, ra, sb, rb, pa, pb := sh.sa, sh.ra, sh.sb, sh.rb, sh.pa, sh.pb
	cs, cr, cp := newCheckDataPath(t, s)

	ncqe := pa.NCQE
	prod := *pa.CI        // the next CQE slot both rings get
	sendNext := uint32(0) // the position after the last WQE a requester CQE was written for
	recvNext := uint32(0) // receives a responder CQE was written for
	writeCQE := func(op uint8, reqOp mlx5.Opcode, counter uint16, qpnA, qpnB uint32) {
		var e [64]byte
		for i := range e {
			e[i] = byte(r.Uint32())
		}
		binary.BigEndian.PutUint16(e[60:], counter)
		owner := byte(0)
		if prod&ncqe != 0 {
			owner = mlx5.CQEOwnerMask
		}
		e[63] = op<<4 | owner | e[63]&0x0e
		if op == mlx5.CQEReq {
			e[56] = byte(reqOp)
		}
		for _, x := range []struct {
			buf []byte
			qpn uint32
		}{{pa.Buf, qpnA}, {pb.Buf, qpnB}} {
			slot := x.buf[int(prod&(ncqe-1))*64:][:64]
			e[57], e[58], e[59] = byte(x.qpn>>16), byte(x.qpn>>8), byte(x.qpn)
			copy(slot[:63], e[:63])
			atomic.StoreUint32((*uint32)(unsafe.Pointer(&slot[60])), binary.LittleEndian.Uint32(e[60:])) // op_own last
		}
		prod++
	}
	polledC, polledGo, errs, recvByC := 0, 0, 0, 0
	wcA := make([]verbs.WC, checkMaxWCs)
	for round := range 4000 {
		switch op := r.IntN(10); {
		case op < 3: // sends, posted alike
			wrs := []verbs.SendWR{randomWR(r, sa.MaxGS, sa.MaxInline, s.data, s.base)}
			if s.a.PostSend(wrs) == nil != cs.post(wrs) {
				t.Fatalf("round %d: the posts disagree", round)
			}
		case op < 5: // receives, posted alike
			wrs := []verbs.RecvWR{{WRID: r.Uint64(), SGL: []verbs.SGE{{Addr: s.base, Length: 64, LKey: 1}}}}
			if s.a.PostRecv(wrs) == nil != cr.post(wrs) {
				t.Fatalf("round %d: the receive posts disagree", round)
			}
		case op < 6: // SHIFT's own WRs, through Go on both
			wrs := []verbs.SendWR{randomWR(r, sa.MaxGS, sa.MaxInline, s.data, s.base)}
			if s.a.PostSendInternal(wrs) == nil != (s.b.PostSendInternal(wrs) == nil) {
				t.Fatalf("round %d: the internal posts disagree", round)
			}
			rwrs := []verbs.RecvWR{{WRID: r.Uint64()}}
			if s.a.PostRecvInternal(rwrs) == nil != (s.b.PostRecvInternal(rwrs) == nil) {
				t.Fatalf("round %d: the internal receive posts disagree", round)
			}
		default: // completions, then polls
			if sendNext == 0 {
				sendNext = uint32(sa.Retired.Load() >> 32)
			}
			for range 1 + r.IntN(4) {
				if prod-*pa.CI >= ncqe-1 {
					break
				}
				switch k := r.IntN(20); {
				case k == 0: // an error completion of the next send
					if cur := *sa.CurPost; sendNext != cur {
						writeCQE(mlx5.CQEReqErr, 0, uint16(sendNext), s.a.QPN(), s.b.QPN())
						sendNext += uint32(sa.NBB[sendNext&(sa.WQECount-1)])
						errs++
					}
				case k == 1: // a QP neither poller knows
					writeCQE(mlx5.CQEReq, mlx5.OpcodeSend, 0, 0xabcde, 0xabcde)
					errs++
				case k < 11: // a send completes: the next or a later one
					cur := *sa.CurPost
					if sendNext == cur {
						continue
					}
					p := sendNext
					for skip := r.IntN(3); skip > 0; skip-- {
						n := p + uint32(sa.NBB[p&(sa.WQECount-1)])
						if n == cur {
							break
						}
						p = n
					}
					idx := p & (sa.WQECount - 1)
					opc := mlx5.Opcode(sa.Ring[int(idx)*64+3])
					writeCQE(mlx5.CQEReq, opc, uint16(p), s.a.QPN(), s.b.QPN())
					sendNext = p + uint32(sa.NBB[idx])
				default: // the next receive completes
					if recvNext == *ra.Head {
						continue
					}
					ops := []uint8{mlx5.CQERespSend, mlx5.CQERespSendImm, mlx5.CQERespWrImm, mlx5.CQERespSendInv}
					writeCQE(ops[r.IntN(len(ops))], 0, uint16(recvNext), s.a.QPN(), s.b.QPN())
					recvNext++
				}
			}
			want := 1 + r.IntN(8)
			na, errA := s.cqA.Poll(wcA[:want])
			got := cp.poll(want)
			polledC += len(got)
			for _, w := range got {
				if w.Opcode&verbs.WCRecv != 0 {
					recvByC++
				}
			}
			if len(got) < na || errA != nil {
				// What C left: the provider's Poll, as the plugin falls back to Go.
				rest := make([]verbs.WC, want-len(got))
				nb, errB := s.cqB.Poll(rest)
				if (errA == nil) != (errB == nil) {
					t.Fatalf("round %d: poll errors differ: %v / %v", round, errA, errB)
				}
				polledGo += nb
				got = append(got, rest[:nb]...)
			}
			for i := range got {
				got[i].QPNum = remap(got[i].QPNum, s.b.QPN(), s.a.QPN())
			}
			if !cmp.Equal(wcA[:na], got) {
				t.Fatalf("round %d: completions (-Go +C):\n%s", round, cmp.Diff(wcA[:na], got))
			}
		}
		type counters struct {
			CI                                       uint32
			SetCI                                    []byte
			SendRetired                              uint64
			SendIntRetired, RecvTail, RecvIntRetired uint32
		}
		of := func(p provider.CQPollShare, sh provider.SendShare, rh provider.RecvShare) counters {
			return counters{*p.CI, bytes.Clone(p.DBRec[:4]), sh.Retired.Load(), sh.IntRetired.Load(), rh.Tail.Load(), rh.IntRetired.Load()}
		}
		if ca, cb := of(pa, sa, ra), of(pb, sb, rb); !cmp.Equal(ca, cb) {
			t.Fatalf("round %d: after the polls (-Go +C):\n%s", round, cmp.Diff(ca, cb))
		}
		if *cp.gate() != 0 {
			t.Fatalf("round %d: the C poller left the gate at %d", round, *cp.gate())
		}
	}
	if polledC == 0 || polledGo == 0 || errs == 0 {
		t.Fatalf("the history did not exercise both pollers: %d completions by C, %d by Go after it, %d errors", polledC, polledGo, errs)
	}
	if got := cp.received(); got != uint64(recvByC) {
		t.Errorf("the C poller counted %d receives completed, it returned %d", got, recvByC)
	}
	t.Logf("%d completions polled by C, %d by the provider after it, %d errors or unknown QPs", polledC, polledGo, errs)
}

// newCheckDataPath gives QP b of s the whole C data path of SHIFT mode (poster, receive
// poster with its log, poller of its CQ) behind gates the test owns, freed at cleanup.
func newCheckDataPath(t testing.TB, s *spostQPs) (*checkSpost, *checkSrecv, *checkSpoll) {
	t.Helper()
	cs, ok := newCheckSpost(s.b, newTestGate().share())
	if !ok {
		t.Fatal("the QP has no send queue")
	}
	t.Cleanup(cs.free)
	cr := newCheckSrecv(s.b, newTestRecvGate(64, int(s.b.Cap().MaxRecvSGE), s.b.Cap().MaxRecvWR).share())
	t.Cleanup(cr.free)
	cp := newCheckSpoll(s.cqB, s.b.QPN(), cs, cr)
	t.Cleanup(cp.free)
	return cs, cr, cp
}

func remap(q, from, to uint32) uint32 {
	if q == from {
		return to
	}
	return q
}

// BenchmarkSharedPostPoll times one signaled 64-byte inline WRITE posted and its completion
// polled, with no device behind the rings (the loop writes the CQE as a NIC would): by the C
// data path of SHIFT mode (spost.c, spoll.c) in a C loop, and by the provider's PostSend and
// Poll in a Go loop, on two QPs of one stepped emulated device. No cgo call is timed, and
// neither includes the application's call into libibverbs.
func BenchmarkSharedPostPoll(b *testing.B) {
	for _, path := range []string{"c", "go"} {
		b.Run(path, func(b *testing.B) { benchSharedPostPoll(b, path == "c") })
	}
}

func benchSharedPostPoll(b *testing.B, viaC bool) {
	s := newSpostQPsTB(b)
	var pin runtime.Pinner
	defer pin.Unpin()
	if viaC {
		cs, _, cp := newCheckDataPath(b, s)
		b.ResetTimer()
		if got := cp.loop(cs, s.data, b.N); got != b.N {
			b.Fatalf("%d of %d completions polled", got, b.N)
		}
		return
	}
	sh, _ := s.a.ShareSend(&pin)
	ps := s.cqA.SharePoll(&pin)
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{{Addr: s.base, Length: 64, LKey: 1}}, RemoteAddr: 0x1000, RKey: 1}}
	wcs := make([]verbs.WC, 1)
	qpn := s.a.QPN()
	b.ResetTimer()
	for range b.N {
		pos, ci := *sh.CurPost, *ps.CI
		if err := s.a.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		e := ps.Buf[int(ci&(ps.NCQE-1))*64:][:64]
		e[56], e[57], e[58], e[59] = byte(mlx5.OpcodeRDMAWrite), byte(qpn>>16), byte(qpn>>8), byte(qpn)
		e[60], e[61] = byte(pos>>8), byte(pos)
		owner := byte(0)
		if ci&ps.NCQE != 0 {
			owner = mlx5.CQEOwnerMask
		}
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&e[60])), uint32(e[60])|uint32(e[61])<<8|uint32(e[62])<<16|uint32(mlx5.CQEReq<<4|owner)<<24)
		if n, err := s.cqA.Poll(wcs); n != 1 || err != nil {
			b.Fatalf("poll: %d, %v", n, err)
		}
	}
}
