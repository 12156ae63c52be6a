package nic

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

func TestWrite(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	const n = 10000 // ten packets at MTU 1024
	fill(a.mem[:n], 3)
	p := a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(0, n)}, raddr: b.va(4096), rkey: b.mr.RKey, signaled: true})
	c := a.scq.poll()
	wc := checkCQE(t, c, mlx5.CQEReq, mlx5.WCSuccess)
	if wc.Opcode != mlx5.WCRDMAWrite || wc.QPN != a.qp.QPN() || wc.WQECounter != p.WQEIndex {
		t.Fatalf("completion %+v, want RDMA_WRITE on qp %#x wqe %d", wc, a.qp.QPN(), p.WQEIndex)
	}
	if !bytes.Equal(b.mem[4096:4096+n], a.mem[:n]) {
		t.Fatal("written data differs at the responder")
	}
	if !b.rcq.empty() {
		t.Fatal("a plain WRITE produced a responder CQE")
	}
}

func TestWriteImmSendRecv(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	b.postRecv(0, 4096)
	b.postRecv(4096, 4096)
	b.postRecv(8192, 4096)

	// SEND of 3000 bytes from registered memory (3 packets).
	fill(a.mem[:3000], 9)
	a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(0, 3000)}, signaled: true})
	// SEND with immediate, inline payload.
	msg := []byte("inline payload for the second receive")
	a.post(wqe{op: mlx5.OpcodeSendImm, inline: msg, imm: 0xdeadbeef, signaled: true})
	// WRITE with immediate: data to a remote address, the immediate consumes a receive.
	fill(a.mem[16384:16384+500], 5)
	a.post(wqe{op: mlx5.OpcodeRDMAWriteImm, local: []mlx5.DataSeg{a.seg(16384, 500)}, raddr: b.va(65536), rkey: b.mr.RKey, imm: 0x01020304, signaled: true})

	for _, want := range []mlx5.WCOpcode{mlx5.WCSend, mlx5.WCSend, mlx5.WCRDMAWrite} {
		wc := checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
		if wc.Opcode != want {
			t.Fatalf("requester opcode %v, want %v", wc.Opcode, want)
		}
	}
	r1 := checkCQE(t, b.rcq.poll(), mlx5.CQERespSend, mlx5.WCSuccess)
	if r1.ByteLen != 3000 || r1.WQECounter != 0 || r1.QPN != b.qp.QPN() || r1.SrcQP != a.qp.QPN() {
		t.Fatalf("first receive %+v", r1)
	}
	if !bytes.Equal(b.mem[:3000], a.mem[:3000]) {
		t.Fatal("SEND data differs")
	}
	r2 := checkCQE(t, b.rcq.poll(), mlx5.CQERespSendImm, mlx5.WCSuccess)
	if r2.ByteLen != uint32(len(msg)) || r2.Imm != 0xdeadbeef || r2.WQECounter != 1 {
		t.Fatalf("second receive %+v", r2)
	}
	if !bytes.Equal(b.mem[4096:4096+len(msg)], msg) {
		t.Fatal("inline SEND data differs")
	}
	r3 := checkCQE(t, b.rcq.poll(), mlx5.CQERespWrImm, mlx5.WCSuccess)
	if r3.ByteLen != 500 || r3.Imm != 0x01020304 || r3.WQECounter != 2 {
		t.Fatalf("WRITE_IMM receive %+v", r3)
	}
	if !bytes.Equal(b.mem[65536:65536+500], a.mem[16384:16384+500]) {
		t.Fatal("WRITE_IMM data differs")
	}
}

func TestReadAndAtomics(t *testing.T) {
	e := newEnv(t)
	a, b := e.pairQPs()
	const n = 5000
	fill(b.mem[8192:8192+n], 77)
	a.post(wqe{op: mlx5.OpcodeRDMARead, local: []mlx5.DataSeg{a.seg(0, n)}, raddr: b.va(8192), rkey: b.mr.RKey, signaled: true})
	wc := checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if wc.Opcode != mlx5.WCRDMARead || wc.ByteLen != n {
		t.Fatalf("READ completion %+v", wc)
	}
	if !bytes.Equal(a.mem[:n], b.mem[8192:8192+n]) {
		t.Fatal("READ data differs")
	}

	// The remote word is a 64-bit integer in the responder's memory; the engine returns the
	// original value into the 8-byte local buffer.
	word := b.mem[100*8 : 101*8]
	binary.NativeEndian.PutUint64(word, 40)
	a.post(wqe{op: mlx5.OpcodeAtomicFA, local: []mlx5.DataSeg{a.seg(16384, 8)}, raddr: b.va(800), rkey: b.mr.RKey, atomic: mlx5.FetchAdd(2), signaled: true})
	wc = checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if wc.Opcode != mlx5.WCFetchAdd || wc.ByteLen != 8 {
		t.Fatalf("FADD completion %+v", wc)
	}
	if got := binary.NativeEndian.Uint64(word); got != 42 {
		t.Fatalf("remote value after FADD %d, want 42", got)
	}
	if got := atomicResult(a.mem[16384:]); got != 40 {
		t.Fatalf("FADD returned %d, want 40", got)
	}

	a.post(wqe{op: mlx5.OpcodeAtomicCS, local: []mlx5.DataSeg{a.seg(16392, 8)}, raddr: b.va(800), rkey: b.mr.RKey, atomic: mlx5.CompareSwap(42, 7), signaled: true})
	wc = checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if wc.Opcode != mlx5.WCCompSwap {
		t.Fatalf("CAS completion %+v", wc)
	}
	if got := binary.NativeEndian.Uint64(word); got != 7 {
		t.Fatalf("remote value after CAS %d, want 7", got)
	}
	if got := atomicResult(a.mem[16392:]); got != 42 {
		t.Fatalf("CAS returned %d, want 42", got)
	}
	// A CAS whose compare fails leaves the word alone and still returns it.
	a.post(wqe{op: mlx5.OpcodeAtomicCS, local: []mlx5.DataSeg{a.seg(16400, 8)}, raddr: b.va(800), rkey: b.mr.RKey, atomic: mlx5.CompareSwap(1, 99), signaled: true})
	checkCQE(t, a.scq.poll(), mlx5.CQEReq, mlx5.WCSuccess)
	if got := binary.NativeEndian.Uint64(word); got != 7 {
		t.Fatalf("remote value after failed CAS %d, want 7", got)
	}
	if got := atomicResult(a.mem[16400:]); got != 7 {
		t.Fatalf("failed CAS returned %d, want 7", got)
	}
}

// atomicResult reads the original value an atomic returned, in the byte order the engine
// documents (rc.WorkRequest.Local: host order).
func atomicResult(b []byte) uint64 { return binary.NativeEndian.Uint64(b[:8]) }

// Every executed opcode maps to a distinct operation and back; others map to none.
func TestOpcodeMapping(t *testing.T) {
	seen := map[rc.Op]bool{}
	for _, m := range wqeOps {
		op := rcOp(m.wqe)
		if op == 0 || seen[op] || sendOpcode(op) != m.wqe {
			t.Fatalf("opcode %#x: operation %v (seen %v), back to %#x", m.wqe, op, seen[op], sendOpcode(op))
		}
		seen[op] = true
	}
	if op := rcOp(mlx5.OpcodeNOP); op != 0 {
		t.Fatalf("NOP maps to %v", op)
	}
}
