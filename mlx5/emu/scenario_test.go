package emu_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/uverbs"
)

// wait is the failure guard of every bounded wait: generous, never a timing assertion.
const wait = 20 * time.Second

func pair(t *testing.T, p emutest.ConnParams) (*emu.Cluster, *emutest.Pair) {
	t.Helper()
	c := newCluster(t, emu.ClusterConfig{Hosts: 2, Seed: 1})
	return c, emutest.NewPair(t, c, emutest.DefaultSize, p)
}

func fill(seed uint64, b []byte) {
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func wantWC(t *testing.T, what string, wc mlx5.WC, st mlx5.WCStatus, op mlx5.WCOpcode, n uint32) {
	t.Helper()
	if wc.Status != st {
		t.Errorf("%s: status %v, want %v", what, wc.Status, st)
		return
	}
	// rdma-core's mlx5_parse_cqe reports byte_len for requester READ and atomic completions
	// and for receives only; the tests pass 0 for WRITE and SEND requester completions.
	if st == mlx5.WCSuccess && (wc.Opcode != op || wc.ByteLen != n) {
		t.Errorf("%s: opcode %v byte_len %d, want %v %d", what, wc.Opcode, wc.ByteLen, op, n)
	}
}

func TestRCOperations(t *testing.T) {
	_, p := pair(t, emutest.DefaultConn)
	ma := p.A.RegMR(64<<10, emutest.AllAccess)
	mb := p.B.RegMR(64<<10, emutest.AllAccess)
	fill(1, ma.Buf)

	// WRITE: 5000 bytes, five packets at MTU 1024.
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:5000])}, RemoteAddr: mb.Addr() + 100, RKey: mb.RKey})
	wantWC(t, "WRITE", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	if !bytes.Equal(mb.Buf[100:5100], ma.Buf[:5000]) {
		t.Error("WRITE: data differs at the responder")
	}
	if !p.RCQB.Empty() {
		t.Error("WRITE consumed a receive at the responder")
	}

	// WRITE_IMM consumes a receive and carries the immediate.
	p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[32<<10:33<<10]))
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWriteImm, Imm: 0x12345678, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[8192:10240])}, RemoteAddr: mb.Addr() + 8192, RKey: mb.RKey})
	wantWC(t, "WRITE_IMM requester", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	wc := p.RCQB.Wait(t, wait)
	wantWC(t, "WRITE_IMM responder", wc, mlx5.WCSuccess, mlx5.WCRecvRDMAWithImm, 2048)
	if wc.Imm != 0x12345678 || wc.Flags&mlx5.WCFlagWithImm == 0 || wc.SrcQP != p.QA.QPN {
		t.Errorf("WRITE_IMM: imm %#x flags %v src qp %#x", wc.Imm, wc.Flags, wc.SrcQP)
	}
	if !bytes.Equal(mb.Buf[8192:10240], ma.Buf[8192:10240]) {
		t.Error("WRITE_IMM: data differs")
	}

	// SEND lands in the next posted receive.
	p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[40<<10:42<<10]))
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[20000:21500])}})
	wantWC(t, "SEND requester", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCSend, 0)
	wantWC(t, "SEND responder", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 1500)
	if !bytes.Equal(mb.Buf[40<<10:40<<10+1500], ma.Buf[20000:21500]) {
		t.Error("SEND: data differs")
	}

	// READ 8 KiB back from B.
	fill(2, mb.Buf[48<<10:56<<10])
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMARead, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[48<<10:56<<10])}, RemoteAddr: mb.Addr() + 48<<10, RKey: mb.RKey})
	wantWC(t, "READ", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMARead, 8192)
	if !bytes.Equal(ma.Buf[48<<10:56<<10], mb.Buf[48<<10:56<<10]) {
		t.Error("READ: data differs")
	}

	// CAS then FADD on one 8-byte word of B; the original value comes back each time.
	word := mb.Buf[60<<10 : 60<<10+8]
	ne := binary.NativeEndian
	ne.PutUint64(word, 5)
	res := ma.Buf[60<<10 : 60<<10+16]
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeAtomicCS, Compare: 5, SwapAdd: 9, Local: []mlx5.DataSeg{emutest.SGE(ma, res[:8])}, RemoteAddr: mb.Addr() + 60<<10, RKey: mb.RKey})
	wantWC(t, "CAS", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCCompSwap, 8)
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeAtomicFA, SwapAdd: 3, Local: []mlx5.DataSeg{emutest.SGE(ma, res[8:])}, RemoteAddr: mb.Addr() + 60<<10, RKey: mb.RKey})
	wantWC(t, "FADD", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCFetchAdd, 8)
	if got, cas, fadd := ne.Uint64(word), ne.Uint64(res[:8]), ne.Uint64(res[8:]); got != 12 || cas != 5 || fadd != 9 {
		t.Errorf("atomics: remote %d (want 12), CAS returned %d (want 5), FADD returned %d (want 9)", got, cas, fadd)
	}
	// A failing compare leaves the word alone and still returns it.
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeAtomicCS, Compare: 1, SwapAdd: 100, Local: []mlx5.DataSeg{emutest.SGE(ma, res[:8])}, RemoteAddr: mb.Addr() + 60<<10, RKey: mb.RKey})
	wantWC(t, "CAS miss", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCCompSwap, 8)
	if got, cas := ne.Uint64(word), ne.Uint64(res[:8]); got != 12 || cas != 12 {
		t.Errorf("CAS miss: remote %d, returned %d, want 12 and 12", got, cas)
	}
}

// A WQE written and published in the doorbell record but not rung through the UAR executes
// nothing; ringing runs it. SHIFT's fence depends on this.
func TestWithheldDoorbell(t *testing.T) {
	_, p := pair(t, emutest.DefaultConn)
	ma := p.A.RegMR(8192, emutest.AllAccess)
	mb := p.B.RegMR(8192, emutest.AllAccess)
	fill(3, ma.Buf)
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:4096])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	// Publish the WQE in the doorbell record too: only the UAR write may start execution.
	p.QA.DB.SetSendCounter(p.QA.SQ.CurPost())
	nic := p.A.Dev.NIC()
	before := nic.Stats()
	// Let the device's watcher make many passes over the UAR page (a count, not a time).
	deadline := time.Now().Add(wait)
	for nic.Stats().Passes < before.Passes+200 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if nic.Stats().Passes < before.Passes+200 {
		t.Fatalf("the doorbell watcher made %d passes", nic.Stats().Passes-before.Passes)
	}
	if after := nic.Stats(); after.WQEsExecuted != before.WQEsExecuted || after.SQDoorbells != before.SQDoorbells {
		t.Fatalf("withheld WQE executed: %+v → %+v", before, after)
	}
	if !p.SCQA.Empty() || !bytes.Equal(mb.Buf[:4096], make([]byte, 4096)) {
		t.Fatal("withheld WQE reached the responder or completed")
	}
	p.QA.Ring()
	wantWC(t, "rung WRITE", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	if !bytes.Equal(mb.Buf[:4096], ma.Buf[:4096]) {
		t.Error("data differs after the doorbell")
	}
}

// isData reports whether p is a request packet carrying payload (not an ACK).
func isData(p *roce.Packet) bool {
	return p.BTH.Opcode <= roce.WriteOnlyWithImmediate
}

// A link that goes down in the middle of a 1 MiB WRITE leaves a prefix of the data at the
// responder; the requester retries retry_cnt times after each local ACK timeout, completes the
// WRITE with RETRY_EXC_ERR and flushes what follows.
func TestLinkDownDuringLargeWrite(t *testing.T) {
	conn := emutest.DefaultConn
	conn.Timeout, conn.RetryCnt = 8, 3 // 4.096 µs × 2^8 ≈ 1 ms per try
	c, p := pair(t, conn)
	const size = 1 << 20
	ma := p.A.RegMR(size, emutest.AllAccess)
	mb := p.B.RegMR(size, emutest.AllAccess)
	fill(4, ma.Buf)
	ep := c.Endpoint(0, 0, 1)
	const passed = 300 // data packets that get through before the link goes down
	var sent atomic.Int32
	ep.Faults(fabric.TX).SetFilter(func(pk *roce.Packet) bool {
		if !isData(pk) {
			return false
		}
		n := sent.Add(1)
		if n == passed+1 {
			go ep.SetLinkUp(false)
		}
		return n > passed
	})
	start := time.Now()
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf)}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}})
	p.QA.Ring()
	wc := p.SCQA.Wait(t, wait)
	elapsed := time.Since(start)
	wantWC(t, "1 MiB WRITE", wc, mlx5.WCRetryExcErr, 0, 0)
	// The error can come no sooner than retry_cnt+1 timeouts after the last progress.
	if min := time.Duration(conn.RetryCnt+1) * 4096 * time.Nanosecond << conn.Timeout; elapsed < min {
		t.Errorf("RETRY_EXC_ERR after %v, before %d timeouts (%v)", elapsed, conn.RetryCnt+1, min)
	}
	for i := range 2 {
		wantWC(t, "WR after the failed WRITE", p.SCQA.Wait(t, wait), mlx5.WCWRFlushErr, 0, 0)
		_ = i
	}
	const prefix = passed * 1024
	if i := firstDiff(mb.Buf, ma.Buf); i < prefix {
		t.Errorf("the packets sent before the link went down did not all land: first difference at %d of %d", i, prefix)
	}
	if !bytes.Equal(mb.Buf[prefix:], make([]byte, size-prefix)) {
		t.Error("data beyond the packets that got through reached the responder")
	}
	if a, err := uverbs.QueryQP(p.A.File, p.QA.Handle, 0, nil); err != nil || a.State != uverbs.QPStateErr {
		t.Errorf("requester state %v %d, want ERR", err, a.State)
	}
	if ev := readAsync(t, p.A.AsyncFD); ev.Type != uverbs.EventPortErr || ev.Element != 1 {
		t.Errorf("async event %+v, want PORT_ERR on port 1", ev)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
