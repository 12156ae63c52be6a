package mlx5

import "testing"

// hotPath is the per-WR work of a provider and a device: build a signaled RDMA WRITE with two
// SGEs, ring it (8-byte doorbell), build an inline SEND and ring it with BlueFlame, parse both,
// publish a CQE for each and poll them.
type hotPath struct {
	sq   *SQ
	cq   *CQ
	db   DBRec
	cqdb DBRec
	bf   *BFReg
	pi   uint32
	wqe  SendWQE
	cqe  CQE64
	data [32]byte
}

func newHotPath(t testing.TB) *hotPath {
	h := &hotPath{}
	var err error
	if h.sq, err = NewSQ(mapped(t, 64*SendWQEBB), 64); err != nil {
		t.Fatal(err)
	}
	h.sq.MaxInline = 64
	if h.cq, err = NewCQ(mapped(t, 64*64), 64, 64); err != nil {
		t.Fatal(err)
	}
	h.cq.Init()
	dbm := mapped(t, 16)
	h.db, _ = NewDBRec(dbm[:8])
	h.cqdb, _ = NewDBRec(dbm[8:])
	uar, _ := NewUARPage(mapped(t, AdapterPageSize))
	h.bf, _ = NewBFReg(uar, Bfreg{Index: 1, Offset: 0xa00, BufSize: 256})
	return h
}

func (h *hotPath) step() {
	idx := h.sq.CurPost()
	b := h.sq.Begin()
	b.Raddr(RaddrSeg{RemoteAddr: 0x10000, RKey: 0x1234})
	b.Data(DataSeg{ByteCount: 4096, LKey: 0x55, Addr: 0x7f0000001000})
	b.Data(DataSeg{ByteCount: 64, LKey: 0x55, Addr: 0x7f0000003000})
	p, err := b.Finish(CtrlSeg{Opcode: OpcodeRDMAWrite, QPN: 0x99, FMCESE: CtrlCQUpdate})
	if err != nil {
		panic(err)
	}
	h.bf.Ring(h.sq, h.db, 1, p, false)

	idx2 := h.sq.CurPost()
	b = h.sq.Begin()
	_ = b.Inline(h.data[:])
	p, _ = b.Finish(CtrlSeg{Opcode: OpcodeSendImm, QPN: 0x99, FMCESE: CtrlCQUpdate, Imm: 7})
	h.bf.Ring(h.sq, h.db, 1, p, true)

	for _, i := range []uint32{idx, idx2} {
		if err := h.sq.Parse(i, &h.wqe); err != nil {
			panic(err)
		}
		c := CQE64{SopDropQPN: uint32(h.wqe.Ctrl.Opcode)<<24 | h.wqe.Ctrl.QPN, WQECounter: h.wqe.Ctrl.WQEIndex, OpOwn: CQEReq << 4}
		h.cq.Publish(h.pi, &c)
		h.pi++
	}
	for h.cq.Poll(&h.cqe) {
		_ = h.cqe.Completion()
	}
	h.cq.UpdateCI(h.cqdb)
}

// TestHotPathAllocs asserts that building, ringing, parsing, publishing and polling allocate
// nothing.
func TestHotPathAllocs(t *testing.T) {
	h := newHotPath(t)
	if n := testing.AllocsPerRun(1000, h.step); n != 0 {
		t.Fatalf("hot path allocates %v times per run", n)
	}
}

func BenchmarkCtrlSegPut(b *testing.B) {
	buf := make([]byte, 16)
	c := CtrlSeg{Opcode: OpcodeRDMAWrite, QPN: 0x99, DS: 3, FMCESE: CtrlCQUpdate}
	for i := 0; b.Loop(); i++ {
		c.WQEIndex = uint16(i)
		c.Put(buf)
	}
}

func BenchmarkDecodeCQE64(b *testing.B) {
	var buf [64]byte
	in := CQE64{SopDropQPN: uint32(OpcodeSend)<<24 | 5, ByteCnt: 9, OpOwn: CQEReq << 4}
	in.Put(buf[:])
	var c CQE64
	for b.Loop() {
		c.decode(buf[:])
	}
	_ = c
}

// BenchmarkBuildWriteWQE builds a 2-SGE RDMA WRITE (ctrl, raddr, 2 data segments).
func BenchmarkBuildWriteWQE(b *testing.B) {
	h := newHotPath(b)
	for b.Loop() {
		w := h.sq.Begin()
		w.Raddr(RaddrSeg{RemoteAddr: 0x10000, RKey: 0x1234})
		w.Data(DataSeg{ByteCount: 4096, LKey: 0x55, Addr: 0x7f0000001000})
		w.Data(DataSeg{ByteCount: 64, LKey: 0x55, Addr: 0x7f0000003000})
		if _, err := w.Finish(CtrlSeg{Opcode: OpcodeRDMAWrite, QPN: 0x99, FMCESE: CtrlCQUpdate}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPostSendDoorbell builds a WRITE and rings it with the 8-byte doorbell sequence.
func BenchmarkPostSendDoorbell(b *testing.B) {
	h := newHotPath(b)
	for b.Loop() {
		w := h.sq.Begin()
		w.Raddr(RaddrSeg{RemoteAddr: 0x10000, RKey: 0x1234})
		w.Data(DataSeg{ByteCount: 4096, LKey: 0x55, Addr: 0x7f0000001000})
		p, _ := w.Finish(CtrlSeg{Opcode: OpcodeRDMAWrite, QPN: 0x99, FMCESE: CtrlCQUpdate})
		h.bf.Ring(h.sq, h.db, 1, p, false)
	}
}

// BenchmarkPostSendBlueFlame builds a 32-byte inline SEND and rings it with a BlueFlame copy.
func BenchmarkPostSendBlueFlame(b *testing.B) {
	h := newHotPath(b)
	for b.Loop() {
		w := h.sq.Begin()
		_ = w.Inline(h.data[:])
		p, _ := w.Finish(CtrlSeg{Opcode: OpcodeSend, QPN: 0x99, FMCESE: CtrlCQUpdate})
		h.bf.Ring(h.sq, h.db, 1, p, true)
	}
}

// BenchmarkPublishPoll is one CQE through the ring: device publish, provider poll and CI
// update.
func BenchmarkPublishPoll(b *testing.B) {
	h := newHotPath(b)
	c := CQE64{SopDropQPN: uint32(OpcodeSend)<<24 | 5, OpOwn: CQEReq << 4}
	for b.Loop() {
		h.cq.Publish(h.pi, &c)
		h.pi++
		if !h.cq.Poll(&h.cqe) {
			b.Fatal("CQE not ready")
		}
		h.cq.UpdateCI(h.cqdb)
	}
}

// BenchmarkPollEmpty is a poll of an empty CQ.
func BenchmarkPollEmpty(b *testing.B) {
	h := newHotPath(b)
	for b.Loop() {
		if h.cq.Poll(&h.cqe) {
			b.Fatal("unexpected CQE")
		}
	}
}
