package mlx5

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// fastSeeded returns a PCG source with a fresh seed, logged so a failure can be replayed.
func fastSeeded(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// fastMapped returns n bytes of page-aligned anonymous memory, unmapped at cleanup.
func fastMapped(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() {
		if err := unix.Munmap(b); err != nil {
			t.Errorf("munmap: %v", err)
		}
	})
	return b
}

// TestFastWQEMatchesBuilder builds random WQEs (every RC opcode, remote address and atomic
// segments, zero-length and several data segments, inline payloads in chunks, at random ring
// positions so WQEs and inline payloads wrap) once with WQEBuilder and once with FastWQE over
// two rings holding the same random garbage, and requires byte-identical rings and identical
// Posted results after every WQE.
func TestFastWQEMatchesBuilder(t *testing.T) {
	r := fastSeeded(t)
	const cnt = 16
	a, err := NewSQ(fastMapped(t, cnt*SendWQEBB), cnt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSQ(fastMapped(t, cnt*SendWQEBB), cnt)
	if err != nil {
		t.Fatal(err)
	}
	a.MaxInline = 512
	for i := range a.buf {
		a.buf[i] = byte(r.Uint32())
	}
	copy(b.buf, a.buf)
	start := uint32(r.IntN(1 << 20))
	a.SetCurPost(start)
	b.SetCurPost(start)
	ops := []Opcode{OpcodeNOP, OpcodeSend, OpcodeSendImm, OpcodeSendInval, OpcodeRDMAWrite, OpcodeRDMAWriteImm,
		OpcodeRDMARead, OpcodeAtomicCS, OpcodeAtomicFA}
	for round := 0; round < 20000; round++ {
		op := ops[r.IntN(len(ops))]
		raddr, atom, _ := op.Segments()
		qpn := r.Uint32() // the builders keep only the low 24 bits
		fm := uint8(r.UintN(256))
		imm := r.Uint32()
		wa := a.Begin()
		var wb FastWQE
		wb.Begin(b)
		ds := 1
		if raddr {
			ra := RaddrSeg{RemoteAddr: r.Uint64(), RKey: r.Uint32()}
			wa.Raddr(ra)
			wb.Raddr(ra.RemoteAddr, ra.RKey)
			ds++
		}
		if atom {
			as := AtomicSeg{SwapAdd: r.Uint64(), Compare: r.Uint64()}
			wa.Atomic(as)
			wb.Atomic(as.SwapAdd, as.Compare)
			ds++
		}
		if !atom && r.IntN(2) == 0 {
			// Inline, in up to 4 chunks (some empty), within the WQE size limit.
			room := min(a.MaxInline, (MaxDS-ds)*SegSize-InlineHdrSize)
			total := r.IntN(room + 1)
			for total > 0 || r.IntN(4) == 0 {
				n := min(total, r.IntN(total+1))
				if r.IntN(4) == 0 {
					n = total
				}
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(r.Uint32())
				}
				if err := wa.Inline(p); err != nil {
					t.Fatalf("round %d: builder inline: %v", round, err)
				}
				wb.Inline(p)
				total -= n
				if total == 0 {
					break
				}
			}
		} else {
			for k := r.IntN(MaxDS - ds + 1); k > 0; k-- {
				d := DataSeg{ByteCount: r.Uint32(), LKey: r.Uint32(), Addr: r.Uint64()}
				if r.IntN(5) == 0 {
					d.ByteCount = 0
				}
				wa.Data(d)
				wb.Data(d.ByteCount, d.LKey, d.Addr)
			}
		}
		pa, err := wa.Finish(CtrlSeg{Opcode: op, QPN: qpn, FMCESE: fm, Imm: imm})
		if err != nil {
			t.Fatalf("round %d: builder finish: %v", round, err)
		}
		pb := wb.Finish(op, qpn, fm, imm)
		if pa != pb {
			t.Fatalf("round %d (%v): Posted %+v, fast %+v", round, op, pa, pb)
		}
		if a.CurPost() != b.CurPost() {
			t.Fatalf("round %d: cur_post %d, fast %d", round, a.CurPost(), b.CurPost())
		}
		if !bytes.Equal(a.buf, b.buf) {
			for i := range a.buf {
				if a.buf[i] != b.buf[i] {
					t.Fatalf("round %d (%v, %+v): rings differ first at byte %d: %#x, fast %#x", round, op, pa, i, a.buf[i], b.buf[i])
				}
			}
		}
	}
}
