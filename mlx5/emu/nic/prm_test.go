package nic

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
)

// The device's PRM code (prm_*.go) against package mlx5's, which the providers use: two
// implementations of one format, each checking the other on random inputs.

func prmSeeded(t *testing.T) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func prmMapped(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// TestPRMSendWQEs builds random WQEs with package mlx5's WQEBuilder (every opcode the device
// executes, data segments or inline payloads, at random ring positions so they wrap) and
// reads them back with the device's parser.
func TestPRMSendWQEs(t *testing.T) {
	r := prmSeeded(t)
	const cnt = 16
	buf := prmMapped(t, cnt*wqeBB)
	sq, err := mlx5.NewSQ(buf, cnt)
	if err != nil {
		t.Fatal(err)
	}
	sq.MaxInline = 512
	ring, err := newSendRing(buf, cnt)
	if err != nil {
		t.Fatal(err)
	}
	sq.SetCurPost(r.Uint32())
	ops := []mlx5.Opcode{mlx5.OpcodeNOP, mlx5.OpcodeSend, mlx5.OpcodeSendImm, mlx5.OpcodeSendInval, mlx5.OpcodeRDMAWrite,
		mlx5.OpcodeRDMAWriteImm, mlx5.OpcodeRDMARead, mlx5.OpcodeAtomicCS, mlx5.OpcodeAtomicFA}
	for round := range 20000 {
		op := ops[r.IntN(len(ops))]
		raddr, atomic, _ := segmentsFor(op)
		want := sendWQE{ctrl: wqeCtrl{opcode: op, qpn: r.Uint32() & 0xffffff, fmCESE: uint8(r.UintN(256)), imm: r.Uint32()}}
		idx := sq.CurPost()
		b := sq.Begin()
		ds := 1
		if raddr {
			want.hasRaddr, want.raddr, want.rkey = true, r.Uint64(), r.Uint32()
			b.Raddr(mlx5.RaddrSeg{RemoteAddr: want.raddr, RKey: want.rkey})
			ds++
		}
		if atomic {
			want.hasAtomic, want.swapAdd, want.compare = true, r.Uint64(), r.Uint64()
			b.Atomic(mlx5.AtomicSeg{SwapAdd: want.swapAdd, Compare: want.compare})
			ds++
		}
		var payload []byte
		if !atomic && r.IntN(2) == 0 {
			payload = make([]byte, 1+r.IntN(min(sq.MaxInline, (dsMask-ds)*segSize-4)))
			for i := range payload {
				payload[i] = byte(r.Uint32())
			}
			if err := b.Inline(payload); err != nil {
				t.Fatalf("round %d: builder inline: %v", round, err)
			}
			want.inline, want.inlineLen = true, len(payload)
		} else {
			for k := r.IntN(dsMask - ds + 1); k > 0; k-- {
				d := wqeData{byteCount: r.Uint32()>>1 | 1, lkey: r.Uint32(), addr: r.Uint64()} // bit 31 would mark inline
				b.Data(mlx5.DataSeg{ByteCount: d.byteCount, LKey: d.lkey, Addr: d.addr})
				want.data[want.numData] = d
				want.numData++
			}
		}
		p, err := b.Finish(mlx5.CtrlSeg{Opcode: op, QPN: want.ctrl.qpn, FMCESE: want.ctrl.fmCESE, Imm: want.ctrl.imm})
		if err != nil {
			t.Fatalf("round %d: builder finish: %v", round, err)
		}
		want.ctrl.index, want.ctrl.ds, want.bbs = uint16(idx), p.DS, int(p.BBs)
		var got sendWQE
		if err := ring.parse(idx, &got); err != nil {
			t.Fatalf("round %d (%v): the device refused a WQE package mlx5 built: %v", round, op, err)
		}
		if want.inline {
			b := make([]byte, got.inlineLen)
			ring.copyInline(&got, b)
			if !bytes.Equal(b, payload) {
				t.Fatalf("round %d: inline payload % x, want % x", round, b, payload)
			}
			got.inlineOff = 0
		}
		if want != got {
			t.Fatalf("round %d (%v): (-built +parsed)\n%s", round, op, cmp.Diff(want, got, cmp.AllowUnexported(sendWQE{}, wqeCtrl{}, wqeData{})))
		}
		// The send doorbell is the control segment's first 8 bytes.
		var v [8]byte
		copy(v[:], buf[p.Offset:])
		if qpn := parseSQDoorbellQPN(v); qpn != want.ctrl.qpn {
			t.Fatalf("round %d: doorbell QPN %#x, want %#x", round, qpn, want.ctrl.qpn)
		}
	}
}

// TestPRMReceiveWQEs posts random scatter lists with package mlx5's RQ and reads them back.
func TestPRMReceiveWQEs(t *testing.T) {
	r := prmSeeded(t)
	const cnt, shift = 8, 6 // four entries per WQE
	buf := prmMapped(t, cnt<<shift)
	rq, err := mlx5.NewRQ(buf, cnt, shift)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := newRecvRing(buf, cnt, shift)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5000 {
		var want []wqeData
		var sges []mlx5.DataSeg
		for range r.IntN(5) {
			d := wqeData{byteCount: r.Uint32(), lkey: r.Uint32()&^0xfff | 0x1000, addr: r.Uint64()}
			want = append(want, d)
			sges = append(sges, mlx5.DataSeg{ByteCount: d.byteCount, LKey: d.lkey, Addr: d.addr})
		}
		idx, err := rq.Post(sges)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]wqeData, 4)
		n, err := ring.parse(idx, got)
		if err != nil || !cmp.Equal(want, got[:n], cmp.AllowUnexported(wqeData{})) && len(want)+n > 0 {
			t.Fatalf("round %d: parsed %+v (%v), want %+v", round, got[:n], err, want)
		}
	}
}

// TestPRMCompletions writes random CQEs with the device's code and reads them with package
// mlx5's decoder, at random producer positions (both owner phases), in rings of 64-byte
// entries and of 128-byte ones (the CQE in the second half, the first left as software set it).
func TestPRMCompletions(t *testing.T) {
	for _, stride := range []int{cqeSize, 2 * cqeSize} {
		t.Run(fmt.Sprint(stride), func(t *testing.T) { prmCompletions(t, stride) })
	}
}

func prmCompletions(t *testing.T, stride int) {
	r := prmSeeded(t)
	const n = 8
	buf := prmMapped(t, n*stride)
	for i := range buf {
		buf[i] = 0xa5
	}
	ring, err := newCQRing(buf, n, stride)
	if err != nil {
		t.Fatal(err)
	}
	ops := []uint8{mlx5.CQEReq, mlx5.CQERespSend, mlx5.CQERespSendImm, mlx5.CQERespWrImm, mlx5.CQEReqErr, mlx5.CQERespErr}
	for round := range 20000 {
		e := cqe{opcode: ops[r.IntN(len(ops))], solicited: r.IntN(2) == 0, flagsRQPN: r.Uint32(), srqnUIdx: r.Uint32(),
			immInvalPKey: r.Uint32(), byteCnt: r.Uint32(), syndrome: uint8(r.Uint32()), vendorSyndrome: uint8(r.Uint32()),
			sopDropQPN: r.Uint32(), wqeCounter: uint16(r.Uint32())}
		pi := r.Uint32()
		ring.publish(pi, &e)
		entry := buf[int(pi%n)*stride:][:stride]
		got, err := mlx5.DecodeCQE64(entry[stride-cqeSize:])
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range entry[:stride-cqeSize] {
			if v != 0xa5 {
				t.Fatalf("round %d: byte %d of the entry's first half written (%#x)", round, i, v)
			}
		}
		owner := uint8(0)
		if pi&n != 0 {
			owner = 1
		}
		want := mlx5.CQE64{FlagsRQPN: e.flagsRQPN, SRQNUIdx: e.srqnUIdx, ImmInvalPKey: e.immInvalPKey, ByteCnt: e.byteCnt,
			SopDropQPN: e.sopDropQPN, WQECounter: e.wqeCounter}
		want.SetOpOwn(e.opcode, e.solicited, owner)
		if e.isError() {
			want.Syndrome, want.VendorSyndrome = e.syndrome, e.vendorSyndrome
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("round %d: (-written +decoded)\n%s", round, d)
		}
	}
}

// TestPRMDoorbells: a CQ arm package mlx5 rings (mlx5_arm_cq's format) and the consumer
// index and producer counters it publishes read back as the device reads them.
func TestPRMDoorbells(t *testing.T) {
	r := prmSeeded(t)
	page := prmMapped(t, mlx5.AdapterPageSize)
	uar, err := mlx5.NewUARPage(page)
	if err != nil {
		t.Fatal(err)
	}
	rec := prmMapped(t, 64)[:8]
	db, err := mlx5.NewDBRec(rec)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := newDBRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 1000 {
		cqn, sn, ci, sol := r.Uint32()&0xffffff, r.Uint32()&3, r.Uint32()&0xffffff, r.IntN(2) == 0
		mlx5.ArmCQ(db, uar, cqn, sn, ci, sol)
		v := uar.Load64(mlx5.CQDoorbell)
		gotCQN, word := parseCQDoorbell(v)
		if gotCQN != cqn || word != mlx5.ArmWord(sn, sol, ci) || dev.load(dbCQArm) != word {
			t.Fatalf("round %d: doorbell CQN %#x word %#x (record %#x), want %#x %#x", round, gotCQN, word, dev.load(dbCQArm), cqn, mlx5.ArmWord(sn, sol, ci))
		}
		db.SetConsumerIndex(ci)
		if dev.consumerIndex() != ci {
			t.Fatalf("round %d: consumer index %#x, want %#x", round, dev.consumerIndex(), ci)
		}
		s, q := r.Uint32(), r.Uint32()
		db.SetSendCounter(s)
		db.SetRecvCounter(q)
		if dev.sendCounter() != uint16(s) || dev.recvCounter() != uint16(q) {
			t.Fatalf("round %d: counters %d/%d, want %d/%d", round, dev.sendCounter(), dev.recvCounter(), uint16(s), uint16(q))
		}
	}
}
