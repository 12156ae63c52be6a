package provider

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Data-path benchmarks over plain memory: they measure the provider's own work (validation,
// WQE writing, doorbell record and UAR store, CQE parsing); the NIC side does not run, and
// the rings are retired between iterations as a NIC completing everything would.

func benchQP(b *testing.B) (*ringQP, *Buffer) {
	r := newRingQP(b, verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}, true)
	payload, err := NewBuffer(4096)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { payload.Free() })
	return r, payload
}

func BenchmarkPostSendInline64(b *testing.B) {
	r, p := benchQP(b)
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendInline | verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: p.Addr(), Length: 64}}, RemoteAddr: 0x1000, RKey: 1}}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		resetSQ(r.qp)
	}
}

func BenchmarkPostSendSGE(b *testing.B) {
	r, p := benchQP(b)
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: p.Addr(), Length: 4096, LKey: 5}}, RemoteAddr: 0x1000, RKey: 1}}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		resetSQ(r.qp)
	}
}

func BenchmarkPostSendList8(b *testing.B) {
	r, p := benchQP(b)
	wrs := make([]verbs.SendWR, 8)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{{Addr: p.Addr(), Length: 512, LKey: 5}},
			RemoteAddr: 0x1000, RKey: 1}
	}
	wrs[7].Flags = verbs.SendSignaled
	b.ReportAllocs()
	for b.Loop() {
		if err := r.qp.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		resetSQ(r.qp)
	}
}

func BenchmarkPostRecv(b *testing.B) {
	r, p := benchQP(b)
	wr := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: p.Addr(), Length: 4096, LKey: 5}}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.qp.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
		r.qp.rq.tail.Store(r.qp.rq.head)
	}
}

func BenchmarkPollEmpty(b *testing.B) {
	r, _ := benchQP(b)
	var wc [16]verbs.WC
	b.ReportAllocs()
	for b.Loop() {
		if n, _ := r.cq.Poll(wc[:]); n != 0 {
			b.Fatal("not empty")
		}
	}
}

// BenchmarkPollOne times polling one CQE; writing the CQE (the NIC's job) is excluded from
// the timing by pre-filling a whole pass of the CQ ring between timer stops.
func BenchmarkPollOne(b *testing.B) {
	r, _ := benchQP(b)
	q := r.qp
	var wc [16]verbs.WC
	ncqe := r.cq.ring.ncqe
	fill := func() {
		for k := uint32(0); k < ncqe; k++ {
			pi := r.cq.ring.ci() + k
			r.nicCQE(pi, mlx5.CQE64{OpOwn: mlx5.CQEReq << 4, SopDropQPN: uint32(mlx5.OpcodeRDMAWrite)<<24 | 0x1234})
		}
	}
	// One posted WQE at index 0 that every CQE names.
	if err := q.PostSend([]verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled}}); err != nil {
		b.Fatal(err)
	}
	fill()
	left := ncqe
	b.ReportAllocs()
	for b.Loop() {
		if left == 0 {
			b.StopTimer()
			fill()
			left = ncqe
			b.StartTimer()
		}
		if n, _ := r.cq.Poll(wc[:1]); n != 1 {
			b.Fatal("no CQE")
		}
		left--
	}
}

// BenchmarkPostSendSGENoDoorbell is BenchmarkPostSendSGE without the doorbell (record, UAR
// store, fences): the cost of validating and writing the WQE alone.
func BenchmarkPostSendSGENoDoorbell(b *testing.B) {
	r, p := benchQP(b)
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: p.Addr(), Length: 4096, LKey: 5}}, RemoteAddr: 0x1000, RKey: 1}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.qp.PostSendNoDoorbell(wr); err != nil {
			b.Fatal(err)
		}
		resetSQ(r.qp)
	}
}
