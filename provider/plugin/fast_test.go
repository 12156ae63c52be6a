package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The differential test of the C data path (fast.c) against package mlx5, in the style of the
// mlx5dv.h oracle: random work requests written by C and by mlx5.FastWQE over two copies of
// the same ring must leave byte-identical rings, and random CQEs read by C and by
// mlx5.CQ.PollWC must give identical completions.

func seeded(t *testing.T) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// mapped is n bytes of anonymous memory (C may read it: it is not Go's heap).
func mapped(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// randomWR is a valid RC work request for a QP with maxGS SGEs and maxInline inline bytes.
func randomWR(r *rand.Rand, maxGS, maxInline int, data []byte, base uint64) verbs.SendWR {
	ops := []verbs.WROpcode{verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRSend, verbs.WRSendWithImm,
		verbs.WRRDMARead, verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAdd}
	wr := verbs.SendWR{WRID: r.Uint64(), Opcode: ops[r.IntN(len(ops))], Imm: r.Uint32(),
		RemoteAddr: r.Uint64(), RKey: r.Uint32(), CompareAdd: r.Uint64(), Swap: r.Uint64()}
	for _, f := range []verbs.SendFlags{verbs.SendFence, verbs.SendSignaled, verbs.SendSolicited, verbs.SendInline} {
		if r.IntN(2) == 0 {
			wr.Flags |= f
		}
	}
	if wr.Opcode == verbs.WRAtomicCmpAndSwp || wr.Opcode == verbs.WRAtomicFetchAdd {
		wr.SGL = []verbs.SGE{{Addr: base + uint64(r.IntN(len(data)-8)), Length: 8, LKey: r.Uint32()}}
		return wr
	}
	budget := maxInline
	for range r.IntN(maxGS + 1) {
		n := 0
		switch r.IntN(4) {
		case 0: // a zero-length SGE: skipped by both
		case 1:
			n = 1 + r.IntN(16)
		default:
			n = r.IntN(budget + 1)
		}
		if wr.Flags&verbs.SendInline != 0 {
			n = min(n, budget)
			budget -= n
		}
		wr.SGL = append(wr.SGL, verbs.SGE{Addr: base + uint64(r.IntN(len(data)-n+1)), Length: uint32(n), LKey: r.Uint32()})
	}
	return wr
}

// TestFastWQEMatchesMlx5 writes 20000 random WRs at random ring positions (so WQEs and inline
// payloads wrap) with C and with package mlx5 over two rings holding the same garbage, on a QP
// with and without sq_sig_all.
func TestFastWQEMatchesMlx5(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		t.Run(fmt.Sprintf("sq_sig_all=%v", sigAll), func(t *testing.T) { testFastWQE(t, sigAll) })
	}
}

func testFastWQE(t *testing.T, sigAll bool) {
	r := seeded(t)
	const cnt, maxGS, maxInline = 16, 4, 400
	ringC, ringGo := mapped(t, cnt*mlx5.SendWQEBB), mapped(t, cnt*mlx5.SendWQEBB)
	data := mapped(t, 4096)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for i := range ringC {
		ringC[i] = byte(r.Uint32())
	}
	copy(ringGo, ringC)
	base := uint64(uintptr(unsafe.Pointer(&data[0])))
	sq, err := mlx5.NewSQ(ringGo, cnt)
	if err != nil {
		t.Fatal(err)
	}
	sq.MaxInline = maxInline
	qpn := r.Uint32() & 0xffffff
	start := r.Uint32()
	sq.SetCurPost(start)
	c := newCheckSQ(ringC, cnt, maxGS, maxInline, qpn, sigAll, start)
	defer c.free()
	for round := range 20000 {
		wr := randomWR(r, maxGS, maxInline, data, base)
		p, inlGo := provider.EncodeSendWR(sq, &wr, qpn, sigAll)
		off, ds, inlC, cur, e := c.write(&wr)
		if e != 0 {
			t.Fatalf("round %d: C rejected %+v: %v", round, wr, e)
		}
		if diff := cmp.Diff(
			[]any{p.Offset, int(p.DS), inlGo, sq.CurPost()},
			[]any{off, ds, inlC, cur}); diff != "" {
			t.Fatalf("round %d: %+v: offset, DS, inline, cur_post (-mlx5 +C):\n%s", round, wr, diff)
		}
		if !bytes.Equal(ringC, ringGo) {
			for i := range ringC {
				if ringC[i] != ringGo[i] {
					t.Fatalf("round %d: %+v: rings differ first at byte %d (block %d): mlx5 % x, C % x", round, wr, i, i/64,
						ringGo[i&^15:i&^15+16], ringC[i&^15:i&^15+16])
				}
			}
		}
	}
}

// TestFastValidate: the C path refuses what the provider refuses, with the provider's errno
// (verbs.Errno of its error), and writes nothing.
func TestFastValidate(t *testing.T) {
	const cnt, maxGS, maxInline = 16, 2, 64
	ring := mapped(t, cnt*mlx5.SendWQEBB)
	data := mapped(t, 4096)
	base := uint64(uintptr(unsafe.Pointer(&data[0])))
	c := newCheckSQ(ring, cnt, maxGS, maxInline, 7, false, 0)
	defer c.free()
	sge := func(n uint32) verbs.SGE { return verbs.SGE{Addr: base, Length: n, LKey: 1} }
	for _, tc := range []struct {
		name string
		wr   verbs.SendWR
		want error
	}{
		{"opcode", verbs.SendWR{Opcode: verbs.WROpcode(99)}, verbs.ErrBadOpcode},
		{"too many SGEs", verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{sge(1), sge(1), sge(1)}}, verbs.ErrTooManySGE},
		{"atomic of 4 bytes", verbs.SendWR{Opcode: verbs.WRAtomicFetchAdd, SGL: []verbs.SGE{sge(4)}}, verbs.ErrBadAtomic},
		{"inline too large", verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, SGL: []verbs.SGE{sge(40), sge(40)}}, verbs.ErrInlineTooLarge},
	} {
		before := bytes.Clone(ring)
		_, _, _, _, e := c.write(&tc.wr)
		if want := verbs.Errno(tc.want); e != want {
			t.Errorf("%s: C returned %v, the provider's errno is %v", tc.name, e, want)
		}
		if !bytes.Equal(before, ring) {
			t.Errorf("%s: a rejected WR was written", tc.name)
		}
	}
	// A large READ with inline set is not inline: READ's SGE is a local destination.
	if _, _, inl, _, e := c.write(&verbs.SendWR{Opcode: verbs.WRRDMARead, Flags: verbs.SendInline, SGL: []verbs.SGE{sge(4000)}}); e != 0 || inl {
		t.Errorf("READ with IBV_SEND_INLINE: errno %v, inline %v; want accepted as a gather entry", e, inl)
	}
}

// TestFastCQEMatchesMlx5 reads random CQEs (every CQE opcode and requester opcode, error
// syndromes, random fields, both owner phases) with C and with mlx5.CQ.PollWC.
func TestFastCQEMatchesMlx5(t *testing.T) {
	r := seeded(t)
	const ncqe = 8
	buf := mapped(t, ncqe*mlx5.CQE64Size)
	cq, err := mlx5.NewCQ(buf, ncqe, mlx5.CQE64Size)
	if err != nil {
		t.Fatal(err)
	}
	cqeOps := []uint8{mlx5.CQEReq, mlx5.CQERespWrImm, mlx5.CQERespSend, mlx5.CQERespSendImm, mlx5.CQERespSendInv,
		mlx5.CQEReqErr, mlx5.CQERespErr, mlx5.CQEInvalid, 3, 9}
	reqOps := []mlx5.Opcode{mlx5.OpcodeRDMAWrite, mlx5.OpcodeRDMAWriteImm, mlx5.OpcodeSend, mlx5.OpcodeSendImm,
		mlx5.OpcodeSendInval, mlx5.OpcodeRDMARead, mlx5.OpcodeAtomicCS, mlx5.OpcodeAtomicFA, mlx5.OpcodeNOP}
	seen := 0
	for round := range 20000 {
		ci := r.Uint32()
		slot := buf[int(ci&(ncqe-1))*mlx5.CQE64Size:][:mlx5.CQE64Size]
		for i := range slot {
			slot[i] = byte(r.Uint32())
		}
		op := cqeOps[r.IntN(len(cqeOps))]
		if op == mlx5.CQEReq {
			slot[56] = byte(reqOps[r.IntN(len(reqOps))]) // sop_drop_qpn's opcode byte
		}
		owner := byte(0)
		if (ci&ncqe != 0) != (r.IntN(4) == 0) { // mostly software's, sometimes the device's
			owner = mlx5.CQEOwnerMask
		}
		slot[63] = op<<4 | owner | slot[63]&0x0e
		cq.SetConsumerIndex(ci)
		var want mlx5.FastWC
		okGo := cq.PollWC(&want)
		got, okC := checkCQE(buf, ncqe, ci)
		if okGo != okC || checkCQEmpty(buf, ncqe, ci) == okGo {
			t.Fatalf("round %d: CQE % x at ci %d: software's per mlx5 %v, per C %v, C's empty check %v",
				round, slot, ci, okGo, okC, checkCQEmpty(buf, ncqe, ci))
		}
		if !okGo {
			continue
		}
		seen++
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: CQE % x (op %#x, sop %#x): (-mlx5 +C):\n%s", round, slot, op,
				binary.BigEndian.Uint32(slot[56:]), diff)
		}
	}
	if seen < 10000 {
		t.Fatalf("only %d of 20000 CQEs were software's: the generator is off", seen)
	}
}
