package emu_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	// The responder holds a prefix of the message, packet by packet, and nothing beyond it:
	// at most the packets that got through (packets already in flight when the link dropped
	// are lost with it), and at least some.
	landed := firstDiff(mb.Buf, ma.Buf) / 1024 * 1024
	if landed == 0 || landed > passed*1024 {
		t.Errorf("%d bytes landed, want a prefix of 1..%d packets", landed, passed)
	}
	if i := firstDiff(mb.Buf[landed:], make([]byte, size-landed)); i != size-landed {
		t.Errorf("data beyond the %d-byte prefix reached the responder (at %d)", landed, landed+i)
	}
	t.Logf("%d of %d packets landed before the link went down", landed/1024, size/1024)
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

// When every ACK is lost, the data has landed at the responder but the requester cannot know
// it: it retries, the responder re-acknowledges duplicates without executing them twice, and
// with the ACKs still lost the requester fails with RETRY_EXC_ERR.
func TestAckLoss(t *testing.T) {
	conn := emutest.DefaultConn
	conn.Timeout, conn.RetryCnt = 8, 2
	c, p := pair(t, conn)
	ma := p.A.RegMR(16<<10, emutest.AllAccess)
	mb := p.B.RegMR(16<<10, emutest.AllAccess)
	fill(5, ma.Buf)
	c.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
	p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[8<<10:12<<10]))
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWriteImm, Imm: 7, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:4096])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	wantWC(t, "WRITE_IMM with every ACK lost", p.SCQA.Wait(t, wait), mlx5.WCRetryExcErr, 0, 0)
	if !bytes.Equal(mb.Buf[:4096], ma.Buf[:4096]) {
		t.Error("the data did not land at the responder")
	}
	// The responder completed the message exactly once although it arrived retry_cnt+1 times.
	wantWC(t, "responder", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecvRDMAWithImm, 4096)
	if !p.RCQB.Empty() {
		t.Error("a retransmitted WRITE_IMM consumed a second receive")
	}
	if st := c.Endpoint(1, 0, 1).Stats(); st.TxDropped < uint64(conn.RetryCnt)+1 {
		t.Errorf("responder dropped %d ACKs, want at least %d (one per try)", st.TxDropped, conn.RetryCnt+1)
	}
}

// One lost ACK costs one retransmission and nothing else.
func TestSingleAckLossRecovers(t *testing.T) {
	conn := emutest.DefaultConn
	conn.Timeout, conn.RetryCnt = 8, 3
	c, p := pair(t, conn)
	ma := p.A.RegMR(8192, emutest.AllAccess)
	mb := p.B.RegMR(8192, emutest.AllAccess)
	fill(6, ma.Buf)
	c.Endpoint(1, 0, 1).Faults(fabric.TX).DropNextAcks(1)
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:2048])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	wantWC(t, "WRITE after one lost ACK", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	if !bytes.Equal(mb.Buf[:2048], ma.Buf[:2048]) {
		t.Error("data differs")
	}
}

// A retransmitted FETCH_ADD is executed once: the responder replays the saved result.
func TestRetransmittedFetchAddAppliedOnce(t *testing.T) {
	conn := emutest.DefaultConn
	conn.Timeout, conn.RetryCnt = 8, 3
	c, p := pair(t, conn)
	ma := p.A.RegMR(4096, emutest.AllAccess)
	mb := p.B.RegMR(4096, emutest.AllAccess)
	ne := binary.NativeEndian
	ne.PutUint64(mb.Buf, 100)
	c.Endpoint(1, 0, 1).Faults(fabric.TX).DropNextAcks(1) // the atomic ACK carrying the result
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeAtomicFA, SwapAdd: 5, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:8])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	wantWC(t, "FADD", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCFetchAdd, 8)
	if got, ret := ne.Uint64(mb.Buf), ne.Uint64(ma.Buf); got != 105 || ret != 100 {
		t.Errorf("remote %d (want 105: added once), returned %d (want 100)", got, ret)
	}
	if st := c.Endpoint(0, 0, 1).Stats(); st.TxPackets < 2 {
		t.Errorf("requester sent %d packets: the FADD was not retransmitted", st.TxPackets)
	}
}

// A SEND to a responder with no posted receive is RNR NAKed; with rnr_retry 0 it fails at once
// with RNR_RETRY_EXC_ERR, with rnr_retry 7 (infinite) it succeeds once a receive is posted.
func TestRNR(t *testing.T) {
	t.Run("exhausted", func(t *testing.T) {
		conn := emutest.DefaultConn
		conn.RNRRetry, conn.MinRNRTimer = 0, 1
		_, p := pair(t, conn)
		ma := p.A.RegMR(4096, emutest.AllAccess)
		p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:100])}})
		wantWC(t, "SEND without receive, rnr_retry 0", p.SCQA.Wait(t, wait), mlx5.WCRNRRetryExcErr, 0, 0)
		if !p.RCQB.Empty() {
			t.Error("the responder completed something")
		}
	})
	t.Run("infinite", func(t *testing.T) {
		conn := emutest.DefaultConn
		conn.RNRRetry, conn.MinRNRTimer = 7, 1 // 7: retry forever; timer code 1 = 0.01 ms
		c, p := pair(t, conn)
		ma := p.A.RegMR(4096, emutest.AllAccess)
		mb := p.B.RegMR(4096, emutest.AllAccess)
		fill(7, ma.Buf)
		p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:300])}})
		// Wait until the responder has refused the SEND a few times (RNR NAKs are ACK packets).
		deadline := time.Now().Add(wait)
		for c.Endpoint(1, 0, 1).Stats().TxPackets < 3 {
			if time.Now().After(deadline) {
				t.Fatal("no RNR NAKs from the responder")
			}
			time.Sleep(100 * time.Microsecond)
		}
		if !p.SCQA.Empty() {
			t.Fatal("the SEND completed before a receive was posted")
		}
		p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[:1024]))
		wantWC(t, "SEND after the receive", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCSend, 0)
		wantWC(t, "receive", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 300)
		if !bytes.Equal(mb.Buf[:300], ma.Buf[:300]) {
			t.Error("data differs")
		}
	})
}

// A WRITE with a bad rkey fails with REM_ACCESS_ERR; the requester flushes what follows and the
// responder QP enters ERR with IBV_EVENT_QP_ACCESS_ERR (it has no CQE to report it on).
func TestBadRKey(t *testing.T) {
	_, p := pair(t, emutest.DefaultConn)
	ma := p.A.RegMR(4096, emutest.AllAccess)
	mb := p.B.RegMR(4096, emutest.AllAccess)
	ro := p.B.RegMR(4096, uverbs.AccessRemoteRead) // readable only
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}, RemoteAddr: ro.Addr(), RKey: ro.RKey})
	p.QA.Post(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	p.QA.Ring()
	wantWC(t, "WRITE to a read-only MR", p.SCQA.Wait(t, wait), mlx5.WCRemAccessErr, 0, 0)
	wantWC(t, "next WRITE", p.SCQA.Wait(t, wait), mlx5.WCWRFlushErr, 0, 0)
	if ev := readAsync(t, p.B.AsyncFD); ev.Type != uverbs.EventQPAccessErr || ev.Element != p.QB.UserHandle {
		t.Errorf("responder event %+v, want QP_ACCESS_ERR for user handle %#x", ev, p.QB.UserHandle)
	}
	for _, q := range []struct {
		x *emutest.Ctx
		h uint32
	}{{p.A, p.QA.Handle}, {p.B, p.QB.Handle}} {
		if a, err := uverbs.QueryQP(q.x.File, q.h, 0, nil); err != nil || a.State != uverbs.QPStateErr {
			t.Errorf("QP state %v %d, want ERR", err, a.State)
		}
	}
	// Destroying the responder QP reports the one event it raised.
	n, err := uverbs.DestroyQP(p.B.File, uverbs.DriverIDMLX5, p.QB.Handle)
	if err != nil || n != 1 {
		t.Errorf("destroy qp: %v, events_reported %d, want 1", err, n)
	}
	// A bad rkey of the right MR is refused the same way on a fresh pair.
	_, p2 := pair(t, emutest.DefaultConn)
	ma2 := p2.A.RegMR(4096, emutest.AllAccess)
	p2.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMARead, Local: []mlx5.DataSeg{emutest.SGE(ma2, ma2.Buf[:64])}, RemoteAddr: 0x1000, RKey: 0xdead00})
	wantWC(t, "READ with an unknown rkey", p2.SCQA.Wait(t, wait), mlx5.WCRemAccessErr, 0, 0)
}

func readComp(t *testing.T, fd int) uverbs.CompEventDesc {
	t.Helper()
	ok, err := uverbs.WaitReadable(fd, wait)
	if err != nil || !ok {
		t.Fatalf("completion channel not readable: %v", err)
	}
	ev, err := uverbs.ReadCompEvent(fd)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// An armed CQ raises one completion event for the next completion, then none until re-armed.
func TestCompletionEventOncePerArm(t *testing.T) {
	c, p := pair(t, emutest.DefaultConn)
	ma := p.A.RegMR(4096, emutest.AllAccess)
	mb := p.B.RegMR(4096, emutest.AllAccess)
	for range 6 {
		p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[:512]))
	}
	send := func() {
		p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:16])}})
		wantWC(t, "SEND", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCSend, 0)
	}
	// Not armed: a completion raises no event.
	send()
	wantWC(t, "receive 1", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 16)
	p.RCQB.Arm(false)
	send()
	send()
	send()
	if ev := readComp(t, p.ChanB); ev.Handle != p.RCQB.UserHandle {
		t.Errorf("event for %#x, want %#x", ev.Handle, p.RCQB.UserHandle)
	}
	p.RCQB.AckEvent()
	for i := range 3 {
		wantWC(t, "receive", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 16)
		_ = i
	}
	// Three completions after one arm: exactly one event. The device raises an event before it
	// moves on, and events are readable when raised; one more completion after the three makes
	// sure any extra event would be there by now.
	send()
	wantWC(t, "receive 5", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 16)
	if ok, _ := uverbs.WaitReadable(p.ChanB, 0); ok {
		t.Error("a second completion event for one arm")
	}
	p.RCQB.Arm(false)
	send()
	if ev := readComp(t, p.ChanB); ev.Handle != p.RCQB.UserHandle {
		t.Errorf("event after re-arm for %#x", ev.Handle)
	}
	p.RCQB.AckEvent()
	wantWC(t, "receive after re-arm", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 16)
	r, err := uverbs.DestroyQP(p.B.File, uverbs.DriverIDMLX5, p.QB.Handle)
	if err != nil || r != 0 {
		t.Errorf("destroy qp %v %d", err, r)
	}
	d, err := uverbs.DestroyCQ(p.B.File, uverbs.DriverIDMLX5, p.RCQB.Handle)
	if err != nil || d.Comp_events_reported != 2 {
		t.Errorf("destroy cq: %v, comp_events_reported %d, want 2", err, d.Comp_events_reported)
	}
	_ = c
}

// After an error both QPs can be reset and reconnected and carry traffic again, the recovery
// path SHIFT takes for a QP it probes or reuses; until then, the hardware state wins over the
// driver's: a transition from the state the driver last set is refused.
func TestRecoverAfterErrorByReset(t *testing.T) {
	_, p := pair(t, emutest.DefaultConn)
	ma := p.A.RegMR(4096, emutest.AllAccess)
	mb := p.B.RegMR(4096, emutest.AllAccess)
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:64])}, RemoteAddr: mb.Addr(), RKey: mb.RKey ^ 0x55})
	wantWC(t, "WRITE with a bad rkey", p.SCQA.Wait(t, wait), mlx5.WCRemAccessErr, 0, 0)
	a := uverbs.QPAttr{State: uverbs.QPStateRTS, CurState: uverbs.QPStateRTS, MinRNRTimer: 2}
	wantErrno(t, "RTS→RTS on a QP the hardware moved to ERR", p.QA.Modify(&a, uverbs.QPAttrState|uverbs.QPAttrCurState|uverbs.QPAttrMinRNRTimer), unix.EINVAL)
	if ev := readAsync(t, p.B.AsyncFD); ev.Type != uverbs.EventQPAccessErr {
		t.Fatalf("responder event %+v", ev)
	}
	for _, q := range []*emutest.QP{p.QA, p.QB} {
		q.Reset(t)
	}
	conn := p.Params
	conn.SQPSN, conn.RQPSN = 0x500, 0x900
	emutest.Connect(t, p.QA, p.QB, conn)
	fill(11, ma.Buf)
	p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[2048:3072]))
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:1024])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[1024:1536])}})
	wantWC(t, "WRITE after reset", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	wantWC(t, "SEND after reset", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCSend, 0)
	wantWC(t, "receive after reset", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 512)
	if !bytes.Equal(mb.Buf[:1024], ma.Buf[:1024]) || !bytes.Equal(mb.Buf[2048:2560], ma.Buf[1024:1536]) {
		t.Error("data differs after reset and reconnect")
	}
}

// A QP bound to port 2 of a two-port HCA uses port 2's GID and link: it carries traffic while
// port 1's link is down, and the port events name the port that changed.
func TestSecondPort(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 2, Ports: 2, Seed: 1})
	a := emutest.Open(t, c.Hosts[0].Devices[0])
	b := emutest.Open(t, c.Hosts[1].Devices[0])
	for _, x := range []*emutest.Ctx{a, b} {
		pr, err := uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 2)
		if err != nil || pr.Legacy_resp.State != uverbs.PortActive {
			t.Fatalf("port 2: %v %+v", err, pr.Legacy_resp)
		}
	}
	c.Endpoint(0, 0, 1).SetLinkUp(false)
	if ev := readAsync(t, a.AsyncFD); ev.Type != uverbs.EventPortErr || ev.Element != 1 {
		t.Fatalf("event %+v, want PORT_ERR on port 1", ev)
	}
	cqa, cqb := a.CreateCQ(16, -1), b.CreateCQ(16, -1)
	qa, qb := a.CreateQP(cqa, cqa, emutest.DefaultSize), b.CreateQP(cqb, cqb, emutest.DefaultSize)
	qa.Port, qb.Port = 2, 2
	if g := netip.AddrFrom16(qa.GID()).Unmap(); g != emu.PortAddr(0, 0, 2) {
		t.Fatalf("port 2 GID %v", g)
	}
	emutest.Connect(t, qa, qb, emutest.DefaultConn)
	ma, mb := a.RegMR(4096, emutest.AllAccess), b.RegMR(4096, emutest.AllAccess)
	fill(12, ma.Buf)
	qa.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:3000])}, RemoteAddr: mb.Addr(), RKey: mb.RKey})
	wantWC(t, "WRITE over port 2", cqa.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	if !bytes.Equal(mb.Buf[:3000], ma.Buf[:3000]) {
		t.Error("data differs")
	}
	if st := c.Endpoint(0, 0, 2).Stats(); st.TxPackets == 0 {
		t.Error("nothing left through port 2's link")
	}
}

// Events count as reported when the application reads them, as the kernel counts them: an
// event left unread in the channel when its CQ is destroyed is withdrawn and not reported
// (libibverbs' ibv_destroy_cq waits for as many acknowledgements as destroy reports, so
// counting it would hang the application).
func TestUnreadEventsNotReported(t *testing.T) {
	_, p := pair(t, emutest.DefaultConn)
	ma := p.A.RegMR(4096, emutest.AllAccess)
	mb := p.B.RegMR(4096, emutest.AllAccess)
	for range 4 {
		p.QB.PostRecv(t, emutest.SGE(mb, mb.Buf[:512]))
	}
	send := func() {
		p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeSend, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:16])}})
		wantWC(t, "SEND", p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCSend, 0)
		wantWC(t, "receive", p.RCQB.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRecv, 16)
	}
	// One event read and acknowledged, one left in the channel.
	p.RCQB.Arm(false)
	send()
	if ev := readComp(t, p.ChanB); ev.Handle != p.RCQB.UserHandle {
		t.Fatalf("event for %#x, want %#x", ev.Handle, p.RCQB.UserHandle)
	}
	p.RCQB.AckEvent()
	p.RCQB.Arm(false)
	send()
	if ok, err := uverbs.WaitReadable(p.ChanB, wait); !ok || err != nil {
		t.Fatalf("second event not raised: %v", err)
	}
	if _, err := uverbs.DestroyQP(p.B.File, uverbs.DriverIDMLX5, p.QB.Handle); err != nil {
		t.Fatal(err)
	}
	d, err := uverbs.DestroyCQ(p.B.File, uverbs.DriverIDMLX5, p.RCQB.Handle)
	if err != nil || d.Comp_events_reported != 1 {
		t.Errorf("destroy cq: %v, comp_events_reported %d, want 1 (the event read)", err, d.Comp_events_reported)
	}
	if ok, _ := uverbs.WaitReadable(p.ChanB, 0); ok {
		t.Error("the destroyed CQ's unread event is still in the channel")
	}
}
