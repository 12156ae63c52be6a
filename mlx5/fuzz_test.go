package mlx5

import (
	"testing"
)

// FuzzDecodeCQE64 feeds arbitrary bytes to the CQE parser: it must never panic, and a decoded
// CQE must encode back to bytes that decode to the same CQE (canonical round trip).
func FuzzDecodeCQE64(f *testing.F) {
	var b [64]byte
	c := CQE64{SopDropQPN: uint32(OpcodeSend)<<24 | 5, ByteCnt: 9, OpOwn: CQEReq << 4}
	c.Put(b[:])
	f.Add(b[:])
	c = CQE64{Syndrome: SyndromeRemoteAccessErr, VendorSyndrome: 0x88, OpOwn: CQEReqErr<<4 | 1}
	c.Put(b[:])
	f.Add(b[:])
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := DecodeCQE64(in)
		if err != nil {
			if len(in) >= CQE64Size {
				t.Fatalf("decode of %d bytes failed: %v", len(in), err)
			}
			return
		}
		_ = c.Completion()
		var out [64]byte
		c.Put(out[:])
		c2, err := DecodeCQE64(out[:])
		if err != nil || c2 != c {
			t.Fatalf("round trip: %+v -> %+v (%v)", c, c2, err)
		}
	})
}

// FuzzDriverData feeds arbitrary bytes to every mlx5-abi.h decoder: no panic, and anything
// decoded re-encodes to bytes that decode to the same value.
func FuzzDriverData(f *testing.F) {
	f.Add(make([]byte, 72))
	f.Add(make([]byte, 7))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		buf := make([]byte, 128)
		if v, err := DecodeAllocUcontextReq(in); err == nil {
			v.Put(buf)
			if w, _ := DecodeAllocUcontextReq(buf[:AllocUcontextReqV2Size]); w != v {
				t.Fatalf("ucontext req %+v != %+v", w, v)
			}
		}
		if v, err := DecodeAllocUcontextResp(in); err == nil {
			v.Put(buf)
			if w, _ := DecodeAllocUcontextResp(buf[:AllocUcontextRespSize]); w != v {
				t.Fatalf("ucontext resp %+v != %+v", w, v)
			}
		}
		if v, err := DecodeCreateCQ(in); err == nil {
			v.Put(buf)
			if w, _ := DecodeCreateCQ(buf[:CreateCQSize]); w != v {
				t.Fatalf("create cq %+v != %+v", w, v)
			}
		}
		if v, err := DecodeCreateCQResp(in); err == nil {
			v.Put(buf)
			if w, _ := DecodeCreateCQResp(buf[:CreateCQRespSize]); w != v {
				t.Fatalf("create cq resp %+v != %+v", w, v)
			}
		}
		if v, err := DecodeCreateQP(in); err == nil {
			v.Put(buf)
			if w, _ := DecodeCreateQP(buf[:CreateQPSize]); w != v {
				t.Fatalf("create qp %+v != %+v", w, v)
			}
		}
		if v, err := DecodeCreateQPResp(in); err == nil {
			v.Put(buf)
			if w, _ := DecodeCreateQPResp(buf[:CreateQPRespSize]); w != v {
				t.Fatalf("create qp resp %+v != %+v", w, v)
			}
		}
	})
}

// FuzzParseSendWQE lays arbitrary bytes into a send ring and parses every index, as a device
// does with whatever a (possibly buggy) provider wrote: no panic, results within bounds.
func FuzzParseSendWQE(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0x0a, 0, 0, 1, 3, 0, 0, 0, 8, 0, 0, 0, 0, 0x80, 0, 0, 5})
	f.Add(make([]byte, 256))
	ring := mapped(f, 4*SendWQEBB)
	q, err := NewSQ(ring, 4)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		clear(ring)
		copy(ring, in)
		var w SendWQE
		dst := make([]byte, 4*SendWQEBB)
		var raw [MaxDS * SegSize]byte
		for idx := uint32(0); idx < 4; idx++ {
			if n, err := q.ReadWQE(idx, raw[:]); err == nil && (n < SegSize || n > 4*SendWQEBB) {
				t.Fatalf("ReadWQE(%d) = %d bytes", idx, n)
			}
			if err := q.Parse(idx, &w); err != nil {
				continue
			}
			if w.BBs < 1 || w.BBs > 4 || w.NumData > len(w.Data) || w.InlineLen > 4*SendWQEBB {
				t.Fatalf("index %d: parsed %+v", idx, w)
			}
			if n := q.CopyInline(&w, dst); n != w.InlineLen && w.Inline {
				t.Fatalf("copied %d of %d inline bytes", n, w.InlineLen)
			}
		}
	})
}

// FuzzMmapOffset checks that every offset libmlx5 can produce decodes back to its command and
// index, and that arbitrary offsets never panic.
func FuzzMmapOffset(f *testing.F) {
	f.Add(uint8(MmapAllocWC), uint16(0x1234), int64(0x201000))
	f.Fuzz(func(t *testing.T, cmd uint8, idx uint16, raw int64) {
		_, _, _ = DecodeMmapOffset(raw, 4096)
		i := int(idx)
		if int(cmd) != MmapAllocWC && int(cmd) < MmapOffsetStart {
			i &= 0xff // only these commands carry an extended index
		}
		c, j, err := DecodeMmapOffset(MmapOffset(int(cmd), i, 4096), 4096)
		if err != nil || c != int(cmd) || j != i {
			t.Fatalf("(%d, %d) -> (%d, %d, %v)", cmd, i, c, j, err)
		}
	})
}
