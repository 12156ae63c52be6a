package provider_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

func TestE2EEveryOpcode(t *testing.T) { everyOpcodeBody(t, newTestbed(t)) }

func everyOpcodeBody(t *testing.T, tb *testbed) {
	a, b := connectedPair(t, tb, defaultPairOpts())
	ab, bb := a.buf.Bytes(), b.buf.Bytes()

	// RDMA WRITE of 8 KiB in two SGEs, unsignaled, then a signaled inline WRITE.
	fill(ab[:8192], 1)
	if err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{a.mr.SGE(0, 4096), a.mr.SGE(4096, 4096)},
			RemoteAddr: b.mr.Addr() + 65536, RKey: b.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendInline | verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 48)}, RemoteAddr: b.mr.Addr() + 131072, RKey: b.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].WRID != 2 || wc[0].Status != verbs.WCSuccess || wc[0].Opcode != verbs.WCRDMAWrite {
		t.Fatalf("write wc %+v", wc[0])
	}
	if !bytes.Equal(bb[65536:65536+8192], ab[:8192]) || !bytes.Equal(bb[131072:131072+48], ab[:48]) {
		t.Fatal("RDMA WRITE data differs at the responder")
	}

	// SEND with immediate into a posted receive; WRITE with immediate consumes the next one.
	if err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 10, SGL: []verbs.SGE{b.mr.SGE(0, 1024)}},
		{WRID: 11, SGL: []verbs.SGE{b.mr.SGE(1024, 16)}}}); err != nil {
		t.Fatal(err)
	}
	fill(ab[200000:200000+700], 2)
	if err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 3, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled, Imm: 0xfeedf00d, SGL: []verbs.SGE{a.mr.SGE(200000, 700)}},
		{WRID: 4, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, Imm: 42,
			SGL: []verbs.SGE{a.mr.SGE(200000, 100)}, RemoteAddr: b.mr.Addr() + 300000, RKey: b.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	swc := waitWC(t, a.cq, 2)
	if swc[0].WRID != 3 || swc[0].Opcode != verbs.WCSend || swc[1].WRID != 4 || swc[1].Opcode != verbs.WCRDMAWrite {
		t.Fatalf("sender wcs %+v", swc)
	}
	rwc := waitWC(t, b.cq, 2)
	if rwc[0].WRID != 10 || rwc[0].Opcode != verbs.WCRecv || rwc[0].ByteLen != 700 || rwc[0].Imm != 0xfeedf00d ||
		rwc[0].Flags&verbs.WCFlagWithImm == 0 || rwc[0].SrcQP != a.qp.QPN() || rwc[0].QPNum != b.qp.QPN() {
		t.Fatalf("recv wc %+v", rwc[0])
	}
	if rwc[1].WRID != 11 || rwc[1].Opcode != verbs.WCRecvRDMAWithImm || rwc[1].Imm != 42 {
		t.Fatalf("write-imm wc %+v", rwc[1])
	}
	if !bytes.Equal(bb[:700], ab[200000:200700]) || !bytes.Equal(bb[300000:300100], ab[200000:200100]) {
		t.Fatal("SEND / WRITE_WITH_IMM data differs")
	}

	// RDMA READ back 4 KiB from b.
	fill(bb[400000:404096], 3)
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 5, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(500000, 4096)}, RemoteAddr: b.mr.Addr() + 400000, RKey: b.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq, 1); wc[0].Opcode != verbs.WCRDMARead || wc[0].ByteLen != 4096 || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("read wc %+v", wc[0])
	}
	if !bytes.Equal(ab[500000:504096], bb[400000:404096]) {
		t.Fatal("RDMA READ data differs")
	}

	// Atomics on an 8-byte word of b: CAS 7→9 (hit), CAS 7→11 (miss), FADD +5.
	binary.NativeEndian.PutUint64(bb[600000:], 7)
	at := []verbs.SendWR{
		{WRID: 6, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(600000, 8)},
			RemoteAddr: b.mr.Addr() + 600000, RKey: b.mr.RKey(), CompareAdd: 7, Swap: 9},
		{WRID: 7, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled | verbs.SendFence, SGL: []verbs.SGE{a.mr.SGE(600008, 8)},
			RemoteAddr: b.mr.Addr() + 600000, RKey: b.mr.RKey(), CompareAdd: 7, Swap: 11},
		{WRID: 8, Opcode: verbs.WRAtomicFetchAdd, Flags: verbs.SendSignaled | verbs.SendFence, SGL: []verbs.SGE{a.mr.SGE(600016, 8)},
			RemoteAddr: b.mr.Addr() + 600000, RKey: b.mr.RKey(), CompareAdd: 5},
	}
	if err := a.qp.PostSend(at); err != nil {
		t.Fatal(err)
	}
	wcs := waitWC(t, a.cq, 3)
	if wcs[0].Opcode != verbs.WCCompSwap || wcs[2].Opcode != verbs.WCFetchAdd || wcs[2].ByteLen != 8 {
		t.Fatalf("atomic wcs %+v", wcs)
	}
	// The initiator's buffers receive the original values of the target word.
	got := []uint64{binary.NativeEndian.Uint64(ab[600000:]), binary.NativeEndian.Uint64(ab[600008:]),
		binary.NativeEndian.Uint64(ab[600016:]), binary.NativeEndian.Uint64(bb[600000:])}
	if got[0] != 7 || got[1] != 9 || got[2] != 9 || got[3] != 14 {
		t.Fatalf("atomics: old values %d %d %d, final %d; want 7 9 9, 14", got[0], got[1], got[2], got[3])
	}
}

func TestE2EPingPong(t *testing.T) { e2ePingPong(t, newTestbed(t)) }

func e2ePingPong(t *testing.T, tb *testbed) {
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	a, b := connectedPair(t, tb, o)
	const iters, size = 200, 256
	// Each side keeps one receive posted at offset 0 and sends from offset 4096.
	post := func(s *side) {
		if err := s.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGL: []verbs.SGE{s.mr.SGE(0, size)}}}); err != nil {
			t.Fatal(err)
		}
	}
	post(a)
	post(b)
	for i := 0; i < iters; i++ {
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		msg := from.buf.Bytes()[4096 : 4096+size]
		fill(msg, uint64(i))
		if err := from.qp.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{from.mr.SGE(4096, size)}}}); err != nil {
			t.Fatal(err)
		}
		wc := waitWC(t, to.cq, 1)
		if wc[0].Status != verbs.WCSuccess || wc[0].Opcode != verbs.WCRecv || wc[0].ByteLen != size {
			t.Fatalf("iter %d: recv %+v", i, wc[0])
		}
		if !bytes.Equal(to.buf.Bytes()[:size], msg) {
			t.Fatalf("iter %d: payload differs", i)
		}
		post(to)
		if wc := waitWC(t, from.cq, 1); wc[0].WRID != uint64(i) || wc[0].Status != verbs.WCSuccess {
			t.Fatalf("iter %d: send %+v", i, wc[0])
		}
	}
}

func TestE2EBandwidthWrites(t *testing.T) { e2eBandwidthWrites(t, newTestbed(t)) }

func e2eBandwidthWrites(t *testing.T, tb *testbed) {
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	o.cap.MaxSendWR = 128
	o.bufSize = 4 << 20
	a, b := connectedPair(t, tb, o)
	const size, total, depth = 16384, 256, 32
	src := a.buf.Bytes()[:size*depth]
	fill(src, 77)
	posted, done := 0, 0
	wr := make([]verbs.SendWR, 8)
	var wc [32]verbs.WC
	deadline := time.Now().Add(30 * time.Second)
	for done < total {
		for posted < total && posted-done+len(wr) <= depth {
			for k := range wr {
				n := posted + k
				slot := n % depth
				wr[k] = verbs.SendWR{WRID: uint64(n), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{a.mr.SGE(slot*size, size)}, RemoteAddr: b.mr.Addr() + uint64(n%(len(b.buf.Bytes())/size))*size, RKey: b.mr.RKey()}
			}
			if err := a.qp.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			posted += len(wr)
		}
		n, err := a.cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:n] {
			if w.Status != verbs.WCSuccess || w.WRID != uint64(done) {
				t.Fatalf("wc %+v, want wr_id %d", w, done)
			}
			done++
		}
		if n == 0 && time.Now().After(deadline) {
			t.Fatalf("stuck at %d/%d", done, total)
		}
	}
	bb := b.buf.Bytes()
	for n := 0; n < total; n++ {
		dst := n % (len(bb) / size)
		if !bytes.Equal(bb[dst*size:(dst+1)*size], src[(n%depth)*size:(n%depth+1)*size]) {
			t.Fatalf("write %d: data differs", n)
		}
	}
}

func TestE2EBadRKeyThenFlush(t *testing.T) { e2eBadRKeyThenFlush(t, newTestbed(t)) }

func e2eBadRKeyThenFlush(t *testing.T, tb *testbed) {
	a, b := connectedPair(t, tb, defaultPairOpts())
	if err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x5500},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	wc := waitWC(t, a.cq, 2)
	if wc[0].WRID != 1 || wc[0].Status != verbs.WCRemAccessErr {
		t.Fatalf("first wc %+v (%v), want REM_ACCESS_ERR", wc[0], wc[0].Status)
	}
	if wc[1].WRID != 2 || wc[1].Status != verbs.WCWRFlushErr {
		t.Fatalf("second wc %+v (%v), want WR_FLUSH_ERR", wc[1], wc[1].Status)
	}
	if attr, err := a.qp.Query(0); err != nil || verbs.QPState(attr.State) != verbs.QPStateErr {
		t.Fatalf("QP state after error: %v %v", attr.State, err)
	}
	// The responder refused the access and its QP went to ERR: mlx5 reports that as the
	// affiliated event IBV_EVENT_QP_ACCESS_ERR on the responder's QP.
	if ev := waitAsync(t, b.ctx, uverbs.EventQPAccessErr); ev.QP != b.qp {
		t.Fatalf("QP_ACCESS_ERR for %+v, want the responder's QP", ev)
	}
	// Posting on an errored QP is refused with a state error, nothing written.
	err := a.qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend}})
	if !errors.Is(err, verbs.ErrQPState) {
		t.Fatalf("post on ERR QP: %v", err)
	}
	// Reset and reconnect: the QP is reusable.
	if err := a.qp.Reset(); err != nil {
		t.Fatal(err)
	}
	if len(a.qp.OutstandingSends(nil)) != 0 {
		t.Fatal("outstanding WQEs survive reset")
	}
}

func TestE2ELinkDownRetryExceeded(t *testing.T) { e2eLinkDownRetryExceeded(t, newTestbed(t)) }

func e2eLinkDownRetryExceeded(t *testing.T, tb *testbed) {
	tb.needEmulator(t, "link down injection")
	linkDownBody(t, tb, func() { tb.cluster.Endpoint(1, 0, 1).SetLinkUp(false) })
}

// linkDownBody takes the responder's link down under a 64 KiB WRITE and a SEND: the
// requester retries timeout × (retry_cnt+1), then reports RETRY_EXC_ERR and flushes the rest.
func linkDownBody(t *testing.T, tb *testbed, down func()) {
	o := defaultPairOpts()
	o.attr.GIDIndex = tb.gid
	o.attr.Timeout = 8 // 1 ms per try
	o.attr.RetryCnt = 2
	a, b := connectedPair(t, tb, o)
	down()
	if err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 65536)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)}},
	}); err != nil {
		t.Fatal(err)
	}
	wc := waitWC(t, a.cq, 2)
	if wc[0].WRID != 1 || wc[0].Status != verbs.WCRetryExcErr {
		t.Fatalf("first wc %+v (%v), want RETRY_EXC_ERR", wc[0], wc[0].Status)
	}
	if wc[1].WRID != 2 || wc[1].Status != verbs.WCWRFlushErr {
		t.Fatalf("second wc %+v (%v), want WR_FLUSH_ERR", wc[1], wc[1].Status)
	}
}

func TestE2ECompletionEvent(t *testing.T) { e2eCompletionEvent(t, newTestbed(t)) }

func e2eCompletionEvent(t *testing.T, tb *testbed) {
	a, b := connectedPair(t, tb, defaultPairOpts())
	if err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 9, SGL: []verbs.SGE{b.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	// Nothing happened yet: a short wait times out.
	short, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	_, err := b.ch.GetEvent(short)
	cancel()
	if !errors.Is(err, verbs.ErrTimeout) {
		t.Fatalf("event before any completion: %v", err)
	}
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	guard, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	cq, err := b.ch.GetEvent(guard)
	if err != nil || cq != b.cq {
		t.Fatalf("event: %v %v", cq, err)
	}
	cq.AckEvents(1)
	if wc := waitWC(t, b.cq, 1); wc[0].WRID != 9 {
		t.Fatalf("wc %+v", wc[0])
	}
}

func TestE2EPortAsyncEvents(t *testing.T) { e2ePortAsyncEvents(t, newTestbed(t)) }

func e2ePortAsyncEvents(t *testing.T, tb *testbed) {
	tb.needEmulator(t, "link down injection")
	a, _ := connectedPair(t, tb, defaultPairOpts())
	ep := tb.cluster.Endpoint(0, 0, 1)
	ep.SetLinkUp(false)
	if ev := waitAsync(t, a.ctx, uverbs.EventPortErr); ev.Port != 1 {
		t.Fatalf("PORT_ERR for port %d", ev.Port)
	}
	if pa, err := a.ctx.QueryPort(1); err != nil || pa.State == uverbs.PortActive {
		t.Fatalf("port state after link down: %+v %v", pa, err)
	}
	ep.SetLinkUp(true)
	if ev := waitAsync(t, a.ctx, uverbs.EventPortActive); ev.Port != 1 {
		t.Fatalf("PORT_ACTIVE for port %d", ev.Port)
	}
}

// An event can leave the channel between GetEvent's poll and its read: another thread read
// it, or its CQ was destroyed (the kernel drops a destroyed CQ's unread events). GetEvent
// must then go on waiting until its context ends, not block in read(2) for good.
func TestCompEventTakenBetweenPollAndRead(t *testing.T) {
	a, b := connectedPair(t, newTestbed(t), defaultPairOpts())
	if err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 9, SGL: []verbs.SGE{b.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	var taken atomic.Int32
	provider.SetBeforeEventRead(t, func(fd int) {
		var ev [8]byte
		if n, err := unix.Read(fd, ev[:]); n == len(ev) && err == nil {
			taken.Add(1)
		}
	})
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	waitWC(t, b.cq, 1)
	// The event is raised after the CQE is written: wait until it is in the channel, so that
	// the hook, not GetEvent's own first read, is the one that takes it. In a loaded make
	// test GetEvent once got the event: most likely the hook read the channel before the
	// event was raised, and GetEvent's read came after it (not reproduced in 960 runs).
	if ok, err := uverbs.WaitReadable(b.ch.Fd(), 20*time.Second); !ok || err != nil {
		t.Fatalf("no completion event in the channel within 20 s: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		short, cancel := context.WithTimeout(bg, 300*time.Millisecond)
		defer cancel()
		_, err := b.ch.GetEvent(short)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, verbs.ErrTimeout) {
			t.Fatalf("GetEvent after its event was taken: %v, want ErrTimeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("GetEvent blocked in read(2) after its event was taken, past its context's end")
	}
	if taken.Load() != 1 {
		t.Fatalf("the hook took %d events, want 1", taken.Load())
	}
}

// GetEvent keeps the channel's registration with the network poller between waits, one
// reader at a time: a second reader's cancelled wait must not end the first's (the shared
// registration's deadline), and Close ends a wait in progress.
func TestCompEventConcurrentWaits(t *testing.T) {
	a, b := connectedPair(t, newTestbed(t), defaultPairOpts())
	if err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 9, SGL: []verbs.SGE{b.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	long, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		cq, err := b.ch.GetEvent(long)
		if err == nil {
			cq.AckEvents(1)
		}
		got <- err
	}()
	for range 3 { // whichever of the two holds the shared registration
		short, cancel := context.WithTimeout(bg, 30*time.Millisecond)
		_, err := b.ch.GetEvent(short)
		cancel()
		if !errors.Is(err, verbs.ErrTimeout) {
			t.Fatalf("the short wait: %v, want ErrTimeout", err)
		}
	}
	if err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the long wait after the short ones were cancelled: %v", err)
	}
	waitWC(t, b.cq, 1)

	ch, err := a.ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	reading, chFd := make(chan struct{}, 1), ch.Fd()
	provider.SetBeforeEventRead(t, func(fd int) {
		if fd == chFd {
			select {
			case reading <- struct{}{}:
			default:
			}
		}
	})
	go func() {
		_, err := ch.GetEvent(long)
		got <- err
	}()
	<-reading // its first read found nothing: it registers and waits (a Close first ends it too)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("GetEvent on a closed channel returned an event")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end GetEvent's wait")
	}
}
