package fence_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// newFence is a fence from the backup path's QP (old) to the default path's (new).
func newFence(t testing.TB, b *bed) *fence.Fence {
	t.Helper()
	f, err := fence.New(b.snd[pathBackup].qp, b.snd[pathDefault].qp)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// stamp fills the sender's slot for sequence number seq (slot bytes at off) with seq in its
// first 8 bytes and a pattern derived from seq after.
func stamp(buf []byte, seq uint64) {
	binary.LittleEndian.PutUint64(buf, seq)
	for i := 8; i < len(buf); i++ {
		buf[i] = byte(seq*131 + uint64(i))
	}
}

// handAll hands every completion in wcs to f and returns the ones that were not the fence's.
func handAll(t testing.TB, f *fence.Fence, wcs []verbs.WC) (rest []verbs.WC, errs []error) {
	t.Helper()
	for i := range wcs {
		ours, err := f.HandleWC(&wcs[i])
		if err != nil {
			errs = append(errs, err)
		}
		if !ours {
			rest = append(rest, wcs[i])
		}
	}
	return rest, errs
}

// TestWithheldDoNotExecuteUntilReleased: WRITEs posted through a pending fence stay invisible
// to the NIC — no doorbell consumed, no WQE executed, remote memory untouched — over many
// doorbell-watcher passes while the fence WR's completion sits unpolled; once it is handed in,
// all of them execute with the right data.
func TestWithheldDoNotExecuteUntilReleased(t *testing.T) { withheldBody(t, newBed(t)) }

func withheldBody(t *testing.T, b *bed) {
	f := newFence(t, b)
	old, nw := b.snd[pathBackup], b.snd[pathDefault]
	const n, size, base = 32, 512, 4096
	sb, rb := b.sbuf.Bytes(), b.rbuf.Bytes()
	for i := range n {
		stamp(sb[base+i*size:base+(i+1)*size], uint64(i+1))
	}
	fw, err := fence.PostSignaled(old.qp, b.write(pathBackup, 0xf00, 0, 8, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Begin(fw, nil); err != nil {
		t.Fatal(err)
	}
	var before nic.Stats
	if nw.dev != nil {
		before = nw.dev.NIC().Stats()
	}
	rung := nw.qp.SendRung()
	for i := range n {
		if err := f.Post([]verbs.SendWR{b.write(pathDefault, uint64(100+i), base+i*size, size, verbs.SendSignaled)}); err != nil {
			t.Fatal(err)
		}
	}
	// The old path completes meanwhile; its completion is deliberately left unpolled.
	if nw.dev != nil {
		waitPasses(t, nw, 500)
		after := nw.dev.NIC().Stats()
		if after.SQDoorbells != before.SQDoorbells || after.WQEsExecuted != before.WQEsExecuted {
			t.Fatalf("NIC saw withheld WQEs: doorbells %d→%d, WQEs executed %d→%d",
				before.SQDoorbells, after.SQDoorbells, before.WQEsExecuted, after.WQEsExecuted)
		}
	} else {
		// A ConnectX has no pass counter to wait on: this window is the time a WQE the NIC
		// knew of would need to execute (far above one RTT) before the receiver is read.
		time.Sleep(50 * time.Millisecond)
	}
	if nw.qp.SendRung() != rung {
		t.Fatalf("doorbell moved from %d to %d while withheld", rung, nw.qp.SendRung())
	}
	if !allZero(rb[base : base+n*size]) {
		t.Fatal("withheld WRITE data visible at the receiver before release")
	}
	var wcs [8]verbs.WC
	if got := poll(t, nw.cq, wcs[:]); len(got) != 0 {
		t.Fatalf("completions on the new QP before release: %+v", got)
	}
	if s := f.State(); s != fence.Withholding {
		t.Fatalf("state %v, want withholding", s)
	}
	held := f.Withheld(nil)
	if len(held) != n {
		t.Fatalf("%d withheld WQEs listed, want %d", len(held), n)
	}
	for i, w := range held {
		if w.WRID != uint64(100+i) || w.Rung || (i > 0 && w.Pos != held[i-1].Pos+uint32(held[i-1].WQEBBs)) {
			t.Fatalf("withheld[%d] = %+v", i, w)
		}
	}

	fwc := waitWCs(t, old.cq, 1)
	if ours, err := f.HandleWC(&fwc[0]); !ours || err != nil {
		t.Fatalf("fence WC %+v: ours %v, err %v", fwc[0], ours, err)
	}
	if s := f.State(); s != fence.Done {
		t.Fatalf("state %v after the fence WC, want done", s)
	}
	got := waitWCs(t, nw.cq, n)
	for i, w := range got {
		if w.Status != verbs.WCSuccess || w.WRID != uint64(100+i) {
			t.Fatalf("completion %d: %+v", i, w)
		}
	}
	if !bytes.Equal(rb[base:base+n*size], sb[base:base+n*size]) {
		t.Fatal("released WRITE data differs at the receiver")
	}
	if st := f.Stats(); st.Begun != 1 || st.Released != 1 || st.WithheldWRs != n || st.ReleasedWRs != n || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(f.Withheld(nil)) != 0 {
		t.Fatal("a done fence lists withheld WQEs")
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// tapEvent is one packet of the default path seen by the fabric tap.
type tapEvent struct {
	where  fabric.TapPoint
	opcode roce.Opcode
	psn    uint32
	toRcv  bool // request towards the receiver (else a response towards the sender)
	oldOK  bool // for requests delivered to the receiver: every old-path slot was complete
}

// TestOrderAcrossFence: a stream of WRITEs with sequence numbers, the first part on the old
// (backup) QP ending in the signaled fence WR, the rest withheld on the new (default) QP
// behind a WRITE_WITH_IMM notification. A fabric tap on the default path proves that (a) when
// the first default-path packet reaches the receiver every old-path WRITE has fully landed,
// (b) the notification is the first request on the default path, and (c) its ACK reaches the
// sender before any withheld WR leaves it: the notification executes strictly before them.
// The receiver's own check on the notification's completion sees all old data too.
func TestOrderAcrossFence(t *testing.T) {
	b := newBed(t)
	f := newFence(t, b)
	old, nw := b.snd[pathBackup], b.snd[pathDefault]
	const nOld, nNew, size = 24, 24, 4096
	sb, rb := b.sbuf.Bytes(), b.rbuf.Bytes()
	for i := range nOld + nNew {
		stamp(sb[i*size:(i+1)*size], uint64(i+1))
	}
	oldComplete := func() bool { return bytes.Equal(rb[:nOld*size], sb[:nOld*size]) }

	rcvAddr, sndAddr := emu.PortAddr(1, pathDefault, 1), emu.PortAddr(0, pathDefault, 1)
	var (
		mu     sync.Mutex
		events []tapEvent
	)
	b.cluster.Fabric.SetTap(func(_ time.Time, where fabric.TapPoint, p *roce.Packet) {
		toRcv := p.DstIP == rcvAddr && p.SrcIP == sndAddr
		if !toRcv && !(p.DstIP == sndAddr && p.SrcIP == rcvAddr) {
			return
		}
		e := tapEvent{where: where, opcode: p.BTH.Opcode, psn: p.BTH.PSN, toRcv: toRcv}
		if toRcv && where == fabric.TapDelivered {
			e.oldOK = oldComplete()
		}
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	t.Cleanup(func() { b.cluster.Fabric.SetTap(nil) })
	b.postRecvs(t, pathDefault, 1)

	wrs := make([]verbs.SendWR, 0, nOld)
	for i := range nOld - 1 {
		wrs = append(wrs, b.write(pathBackup, uint64(i+1), i*size, size, 0))
	}
	if err := old.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	fw, err := fence.PostSignaled(old.qp, b.write(pathBackup, nOld, (nOld-1)*size, size, 0))
	if err != nil {
		t.Fatal(err)
	}
	notify := b.writeImm(pathDefault, 0x4e, bufSize-128, 0xfe4ce)
	if err := f.Begin(fw, &notify); err != nil {
		t.Fatal(err)
	}
	for i := nOld; i < nOld+nNew; i++ {
		fl := verbs.SendFlags(0)
		if i == nOld+nNew-1 {
			fl = verbs.SendSignaled
		}
		if err := f.Post([]verbs.SendWR{b.write(pathDefault, uint64(i+1), i*size, size, fl)}); err != nil {
			t.Fatal(err)
		}
	}

	// Drive the fence from one poll loop over both send CQs, as the failover layer does,
	// and play the receiver: on the notification it checks the old data.
	var (
		buf          [16]verbs.WC
		newWCs       []verbs.WC
		notifiedSeen bool
	)
	deadline := time.Now().Add(30 * time.Second)
	for f.State() != fence.Done || len(newWCs) < 1 || !notifiedSeen {
		progress := false
		for _, cq := range []*provider.CQ{old.cq, nw.cq} {
			got := poll(t, cq, buf[:])
			rest, errs := handAll(t, f, got)
			if len(errs) > 0 {
				t.Fatalf("fence failed: %v", errs)
			}
			for _, w := range rest {
				if w.QPNum == nw.qp.QPN() {
					newWCs = append(newWCs, w)
				} else if w.Status != verbs.WCSuccess {
					t.Fatalf("old-path completion %+v", w)
				}
			}
			progress = progress || len(got) > 0
		}
		for _, w := range poll(t, b.rcv[pathDefault].cq, buf[:]) {
			if w.Opcode != verbs.WCRecvRDMAWithImm || w.Imm != 0xfe4ce {
				t.Fatalf("receiver completion %+v", w)
			}
			if !oldComplete() {
				t.Fatal("receiver: old-path data incomplete at the notification")
			}
			notifiedSeen = true
			progress = true
		}
		if !progress {
			if time.Now().After(deadline) {
				t.Fatalf("stuck in %v with %d new completions", f.State(), len(newWCs))
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	if len(newWCs) != 1 || newWCs[0].WRID != nOld+nNew || newWCs[0].Status != verbs.WCSuccess {
		t.Fatalf("new-path completions %+v", newWCs)
	}
	if !bytes.Equal(rb[:(nOld+nNew)*size], sb[:(nOld+nNew)*size]) {
		t.Fatal("receiver data differs after the fence")
	}

	mu.Lock()
	defer mu.Unlock()
	firstReq, notifyAck, firstHeld := -1, -1, -1
	var notifyPSN uint32
	for i, e := range events {
		switch {
		case e.toRcv && e.where == fabric.TapDelivered:
			if !e.oldOK {
				t.Fatalf("default-path packet %d (%v psn %#x) reached the receiver before all old-path WRITEs landed", i, e.opcode, e.psn)
			}
		case e.toRcv && e.where == fabric.TapSent:
			if firstReq < 0 {
				firstReq = i
				notifyPSN = e.psn
				if e.opcode != roce.WriteOnlyWithImmediate {
					t.Fatalf("first default-path request is %v, want the notification", e.opcode)
				}
			} else if firstHeld < 0 && e.psn != notifyPSN {
				firstHeld = i
			}
		case !e.toRcv && e.where == fabric.TapDelivered && e.opcode == roce.Acknowledge:
			if firstReq >= 0 && notifyAck < 0 && int32((e.psn-notifyPSN)<<8) >= 0 {
				notifyAck = i
			}
		}
	}
	if firstReq < 0 || notifyAck < 0 || firstHeld < 0 {
		t.Fatalf("tap saw notification at %d, its ACK at %d, first withheld WR at %d", firstReq, notifyAck, firstHeld)
	}
	if notifyAck > firstHeld {
		t.Fatalf("first withheld WR sent (event %d) before the notification's ACK arrived (event %d)", firstHeld, notifyAck)
	}
}

// TestFenceWRErrorLeavesWithheldUnrung: the fence WR fails (remote access error: bad rkey);
// the fence reports ErrFenceWR, rings nothing on the new QP, and lists exactly the withheld
// WRs with their positions and wr_ids, which the NIC never executes.
func TestFenceWRErrorLeavesWithheldUnrung(t *testing.T) {
	b := newBed(t)
	f := newFence(t, b)
	old, nw := b.snd[pathBackup], b.snd[pathDefault]
	bad := b.write(pathBackup, 0xbad, 0, 8, 0)
	bad.RKey ^= 0x5a5a00
	fw, err := fence.PostSignaled(old.qp, bad)
	if err != nil {
		t.Fatal(err)
	}
	notify := b.writeImm(pathDefault, 0x4e, bufSize-128, 1)
	b.postRecvs(t, pathDefault, 1)
	if err := f.Begin(fw, &notify); err != nil {
		t.Fatal(err)
	}
	rung := nw.qp.SendRung()
	var want []provider.SendWQE
	for i := range 10 {
		pos := nw.qp.SendProducer()
		if err := f.Post([]verbs.SendWR{b.write(pathDefault, uint64(200+i), 8192+i*64, 64, verbs.SendSignaled)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, provider.SendWQE{Pos: pos, WRID: uint64(200 + i)})
	}
	wc := waitWCs(t, old.cq, 1)
	ours, err := f.HandleWC(&wc[0])
	if !ours || !errors.Is(err, fence.ErrFenceWR) {
		t.Fatalf("fence WC %+v: ours %v, err %v", wc[0], ours, err)
	}
	if s := f.State(); s != fence.Failed || !errors.Is(f.Err(), fence.ErrFenceWR) {
		t.Fatalf("state %v, err %v", s, f.Err())
	}
	if nw.qp.SendRung() != rung {
		t.Fatal("the failed fence rang the new QP")
	}
	if err := f.Post([]verbs.SendWR{b.write(pathDefault, 1, 0, 8, 0)}); !errors.Is(err, fence.ErrFailed) {
		t.Fatalf("post after failure: %v", err)
	}
	before := nw.dev.NIC().Stats()
	waitPasses(t, nw, 200)
	if after := nw.dev.NIC().Stats(); after.WQEsExecuted != before.WQEsExecuted || !allZero(b.rbuf.Bytes()[8192:8192+640]) {
		t.Fatal("withheld WRs executed after a failed fence")
	}
	got := f.Withheld(nil)
	if len(got) != len(want) {
		t.Fatalf("withheld %+v, want %d entries", got, len(want))
	}
	for i := range got {
		if got[i].Pos != want[i].Pos || got[i].WRID != want[i].WRID || got[i].Rung {
			t.Fatalf("withheld[%d] = %+v, want pos %d wr_id %#x", i, got[i], want[i].Pos, want[i].WRID)
		}
	}
	// The caller can carry them elsewhere: copy them, in order, to a fresh backup QP.
	b.connect(t, pathBackup)
	for _, w := range got {
		if _, err := old.qp.CopySendWQE(nw.qp, w.Pos, provider.WQERewrite{
			LKey: func(uint32) uint32 { return old.mr.LKey() },
			RKey: func(uint32) uint32 { return b.rcv[pathBackup].mr.RKey() },
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.qp.RingSendDoorbell(old.qp.SendProducer()); err != nil {
		t.Fatal(err)
	}
	for i, w := range waitWCs(t, old.cq, len(got)) {
		if w.Status != verbs.WCSuccess || w.WRID != want[i].WRID {
			t.Fatalf("copied WR %d: %+v", i, w)
		}
	}
	if !bytes.Equal(b.rbuf.Bytes()[8192:8192+640], b.sbuf.Bytes()[8192:8192+640]) {
		t.Fatal("copied WRs wrote wrong data")
	}
	if st := f.Stats(); st.Failed != 1 || st.Released != 0 || st.Notifications != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := f.Reset(); err != nil || f.State() != fence.Idle {
		t.Fatalf("reset: %v, state %v", err, f.State())
	}
}

// TestNotificationErrorLeavesWithheldUnrung: the fence WR succeeds, the notification is rung
// alone and fails (bad rkey); the withheld WRs behind it stay unrung and are listed.
func TestNotificationErrorLeavesWithheldUnrung(t *testing.T) {
	b := newBed(t)
	f := newFence(t, b)
	old, nw := b.snd[pathBackup], b.snd[pathDefault]
	fw, err := fence.PostSignaled(old.qp, b.write(pathBackup, 0xf, 0, 8, 0))
	if err != nil {
		t.Fatal(err)
	}
	notify := b.writeImm(pathDefault, 0x4e, bufSize-128, 1)
	notify.RKey ^= 0x5a5a00
	if err := f.Begin(fw, &notify); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := f.Post([]verbs.SendWR{b.write(pathDefault, uint64(300+i), 16384+i*64, 64, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	wc := waitWCs(t, old.cq, 1)
	if ours, err := f.HandleWC(&wc[0]); !ours || err != nil || f.State() != fence.Notifying {
		t.Fatalf("fence WC: ours %v err %v state %v", ours, err, f.State())
	}
	n, _ := f.Notification()
	if nw.qp.SendRung() != n.Pos+1 {
		t.Fatalf("rung up to %d, want the notification's end %d", nw.qp.SendRung(), n.Pos+1)
	}
	wc = waitWCs(t, nw.cq, 1)
	if ours, err := f.HandleWC(&wc[0]); !ours || !errors.Is(err, fence.ErrNotification) || f.State() != fence.Failed {
		t.Fatalf("notification WC %+v: ours %v err %v state %v", wc[0], ours, err, f.State())
	}
	got := f.Withheld(nil)
	if len(got) != 5 {
		t.Fatalf("withheld %+v", got)
	}
	for i, w := range got {
		if w.WRID != uint64(300+i) || w.Rung {
			t.Fatalf("withheld[%d] = %+v", i, w)
		}
	}
	if !allZero(b.rbuf.Bytes()[16384 : 16384+5*64]) {
		t.Fatal("withheld WRs executed")
	}
}

// TestArgumentsAndStates covers the refusals that need no traffic.
func TestArgumentsAndStates(t *testing.T) {
	b := newBed(t)
	old, nw := b.snd[pathBackup].qp, b.snd[pathDefault].qp
	if _, err := fence.New(old, old); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("same QP twice: %v", err)
	}
	if _, err := fence.New(nil, nw); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("nil QP: %v", err)
	}
	f := newFence(t, b)
	if err := f.Post([]verbs.SendWR{b.write(pathDefault, 1, 0, 8, 0)}); !errors.Is(err, fence.ErrState) {
		t.Fatalf("post before begin: %v", err)
	}
	if err := f.Abort(errors.New("x")); !errors.Is(err, fence.ErrState) {
		t.Fatalf("abort while idle: %v", err)
	}
	// Not outstanding: a position nothing was posted at.
	if err := f.Begin(fence.WR{Pos: old.SendProducer(), WRID: 1}, nil); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("begin on an unposted WR: %v", err)
	}
	// Unsignaled fence WR.
	pos := old.SendProducer()
	if err := old.PostSend([]verbs.SendWR{b.write(pathBackup, 7, 0, 8, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Begin(fence.WR{Pos: pos, WRID: 7}, nil); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("begin on an unsignaled WR: %v", err)
	}
	fw, err := fence.PostSignaled(old, b.write(pathBackup, 8, 0, 8, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Begin(fence.WR{Pos: fw.Pos, WRID: 9}, nil); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("begin with the wrong wr_id: %v", err)
	}
	if err := f.Begin(fw, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Begin(fw, nil); !errors.Is(err, fence.ErrState) {
		t.Fatalf("second begin: %v", err)
	}
	if err := f.Reset(); !errors.Is(err, fence.ErrState) {
		t.Fatalf("reset while pending: %v", err)
	}
	if err := f.Post([]verbs.SendWR{b.write(pathDefault, 10, 0, 8, 0)}); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("link down")
	if err := f.Abort(cause); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(f.Err(), fence.ErrAborted) || !errors.Is(f.Err(), cause) || f.State() != fence.Failed {
		t.Fatalf("after abort: %v %v", f.State(), f.Err())
	}
	if w := f.Withheld(nil); len(w) != 1 || w[0].WRID != 10 {
		t.Fatalf("withheld after abort %+v", w)
	}
	// A completion that is not the fence's is left to the caller.
	wcs := waitWCs(t, b.snd[pathBackup].cq, 1)
	for i := range wcs {
		if ours, err := f.HandleWC(&wcs[i]); ours || err != nil {
			t.Fatalf("completion %+v after failure: ours %v err %v", wcs[i], ours, err)
		}
	}
	if st := f.Stats(); st.Aborted != 1 || st.Begun != 1 || st.WithheldWRs != 1 {
		t.Fatalf("stats %+v", st)
	}
	names := []string{}
	for s := fence.Idle; s <= fence.Failed+1; s++ {
		names = append(names, s.String())
	}
	if !slices.Equal(names, []string{"idle", "withholding", "notifying", "done", "failed", "state(5)"}) {
		t.Fatalf("state names %q", names)
	}
}

// TestFenceWCMatchedByPosition: an earlier signaled WR on the old QP carrying the fence WR's
// wr_id does not release the fence; only the completion that retires the fence WR's own WQE
// does. The fence WR here is what SHIFT issues itself when the application posts no signaled
// WR in time: a signaled zero-length WRITE.
func TestFenceWCMatchedByPosition(t *testing.T) {
	b := newBed(t)
	f := newFence(t, b)
	old, nw := b.snd[pathBackup], b.snd[pathDefault]
	const id = 0x77
	if err := old.qp.PostSend([]verbs.SendWR{b.write(pathBackup, id, 0, 64, verbs.SendSignaled)}); err != nil {
		t.Fatal(err)
	}
	fw, err := fence.PostSignaled(old.qp, verbs.SendWR{WRID: id, Opcode: verbs.WRRDMAWrite,
		RemoteAddr: b.rcv[pathBackup].mr.Addr(), RKey: b.rcv[pathBackup].mr.RKey()})
	if err != nil {
		t.Fatal(err)
	}
	// Begin before either completion is polled.
	if err := f.Begin(fw, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Post([]verbs.SendWR{b.write(pathDefault, 0x99, 128, 64, verbs.SendSignaled)}); err != nil {
		t.Fatal(err)
	}
	wcs := waitWCs(t, old.cq, 2)
	if ours, err := f.HandleWC(&wcs[0]); ours || err != nil || f.State() != fence.Withholding {
		t.Fatalf("earlier WR with the fence's wr_id: ours %v, err %v, state %v", ours, err, f.State())
	}
	if nw.qp.SendRung() == nw.qp.SendProducer() {
		t.Fatal("released by the wrong completion")
	}
	if ours, err := f.HandleWC(&wcs[1]); !ours || err != nil || f.State() != fence.Done {
		t.Fatalf("fence WR completion: ours %v, err %v, state %v", ours, err, f.State())
	}
	if wc := waitWCs(t, nw.cq, 1); wc[0].WRID != 0x99 || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("released WR: %+v", wc[0])
	}
	// Once done, the fence posts with the doorbell.
	if err := f.Post([]verbs.SendWR{b.write(pathDefault, 0x9a, 128, 64, verbs.SendSignaled)}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWCs(t, nw.cq, 1); wc[0].WRID != 0x9a {
		t.Fatalf("post after done: %+v", wc[0])
	}
	// Begin refuses a fence WR whose completion was already polled.
	if err := f.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := f.Begin(fw, nil); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("begin on a retired fence WR: %v", err)
	}
}
