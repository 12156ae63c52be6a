package failover

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestDeadNICRefusedFlushes: the default NIC dies with an atomic outstanding, so the fallback
// is refused and the QP fails; the dead NIC writes no flush, and SHIFT completes every WR the
// application still had outstanding with a flush error itself (deadflush.go), sends in posting
// order and the receive. Before, the application waited for them for ever (found by
// internal/sim, a default NIC killed in a run posting FETCH_ADD over the failover layer).
func TestDeadNICRefusedFlushes(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	nic := e.cl.Hosts[0].Devices[0].NIC()
	// Hung first, so that nothing posted next executes; then dead, which says so.
	nic.Hang()
	if err := qa.PostRecv([]verbs.RecvWR{{WRID: 30, SGL: []verbs.SGE{ha.mr.SGE(512, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend([]verbs.SendWR{
		{WRID: 10, Opcode: verbs.WRAtomicFetchAdd, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 8)},
			RemoteAddr: hb.mr.Addr() + 64, RKey: hb.mr.RKey(), CompareAdd: 7},
		{WRID: 11, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(64, 64)}, RemoteAddr: hb.mr.Addr() + 128, RKey: hb.mr.RKey()},
		{WRID: 12, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(128, 64)}, RemoteAddr: hb.mr.Addr() + 256, RKey: hb.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	nic.Kill()
	errorsInOrder(t, ha.cq, 30, 10, 11, 12)
	if qa.SendState() != SendFailed || !errors.Is(qa.Err(), ErrNotSafe) {
		t.Fatalf("state %v err %v", qa.SendState(), qa.Err())
	}
	expectNoMore(t, ha.cq)
}

// TestDeadBackupFailedFlushes: a QP runs on its only backup (SwitchToBackup) with a receive
// and two sends outstanding there (the peer posts no receive: the SEND waits on RNR); the
// backup NIC hangs, then dies. With no next backup the QP fails, and the dead NIC writes no
// flush: the sends complete with errors in posting order (the set's failure reports them) and
// SHIFT completes the receive with WR_FLUSH_ERR itself (flushDeadSetLocked). Before, the
// application waited for the receive for ever (found by internal/sim: a QP the application
// stopped on a backup that had hung kept its WRs there).
func TestDeadBackupFailedFlushes(t *testing.T) {
	e, qa, ha, hb := switchedPair(t)
	nic := e.cl.Hosts[0].Devices[1].NIC()
	nic.Hang() // nothing posted next executes
	if err := qa.PostRecv([]verbs.RecvWR{{WRID: 30, SGL: []verbs.SGE{ha.mr.SGE(512, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend([]verbs.SendWR{
		{WRID: 10, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}},
		{WRID: 11, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(64, 64)}, RemoteAddr: hb.mr.Addr() + 128, RKey: hb.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	nic.Kill()
	errorsInOrder(t, ha.cq, 30, 10, 11)
	if qa.SendState() != SendFailed {
		t.Fatalf("state %v err %v", qa.SendState(), qa.Err())
	}
	expectNoMore(t, ha.cq)
}

// switchedPair is an environment with one QP pair, host A's QP switched to its only backup.
func switchedPair(t *testing.T) (*testEnv, *QP, *testHost, *testHost) {
	t.Helper()
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	if err := a[0].SwitchToBackup(); err != nil {
		t.Fatal(err)
	}
	return e, a[0], e.hosts[0], e.hosts[1]
}

// writes posts a signaled 64-byte WRITE (wr_id 9) on qa, switched to its backup, waits for
// its completion, and returns a maker of such WRITEs from ha's buffer to hb's at an offset.
func writes(t *testing.T, qa *QP, ha, hb *testHost) func(id uint64, off int, flags verbs.SendFlags) verbs.SendWR {
	t.Helper()
	write := func(id uint64, off int, flags verbs.SendFlags) verbs.SendWR {
		return verbs.SendWR{WRID: id, Opcode: verbs.WRRDMAWrite, Flags: flags, SGL: []verbs.SGE{ha.mr.SGE(off, 64)},
			RemoteAddr: hb.mr.Addr() + uint64(off), RKey: hb.mr.RKey()}
	}
	if err := qa.PostSend([]verbs.SendWR{write(9, 0, verbs.SendSignaled)}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 9 || qa.SendState() != SendFallback {
		t.Fatalf("completion %+v, state %v: want the switch done", w, qa.SendState())
	}
	return write
}

// errorsInOrder waits for the error completions of the sends (in this order) and of the
// receive recv on cq.
func errorsInOrder(t *testing.T, cq *CQ, recv uint64, sends ...uint64) {
	t.Helper()
	ws := waitN(t, cq, len(sends)+1)
	var got []uint64
	sawRecv := false
	for _, w := range ws {
		if w.Status == verbs.WCSuccess {
			t.Fatalf("completion %+v: want an error", w)
		}
		if w.WRID == recv {
			sawRecv = true
			continue
		}
		got = append(got, w.WRID)
	}
	if !sawRecv || !slices.Equal(got, sends) {
		t.Fatalf("completions %+v: want wr_id %v in order and the receive %d", ws, sends, recv)
	}
}

// TestDeadBackupAfterFlushes: a QP runs on its only backup, whose peer NIC then hangs with
// three WRITEs and a receive outstanding there: the WRITEs exhaust their retries, the QP
// fails, and the set's own error completions report all four. Then that backup NIC dies. The
// dead set's flush (flushDeadSetLocked) must not complete them a second time (it did the
// WRITEs: their error completions did not take them off the backup log).
func TestDeadBackupAfterFlushes(t *testing.T) {
	e, qa, ha, hb := switchedPair(t)
	write := writes(t, qa, ha, hb)
	if err := qa.PostRecv([]verbs.RecvWR{{WRID: 30, SGL: []verbs.SGE{ha.mr.SGE(512, 64)}}}); err != nil {
		t.Fatal(err)
	}
	e.cl.Hosts[1].Devices[1].NIC().Hang() // the peer's backup NIC: no ACK, no event here
	if err := qa.PostSend([]verbs.SendWR{write(10, 64, 0), write(11, 128, verbs.SendSignaled), write(12, 192, verbs.SendSignaled)}); err != nil {
		t.Fatal(err)
	}
	// A post that found the QP's mutex held left its WRs to the engine (inbox.go).
	waitFor(t, "the inbox posted", func() bool { return qa.box.nSend.Load() == 0 }, func() string { return "" })
	qa.fifoMu.Lock()
	logged := len(qa.bkLog)
	qa.fifoMu.Unlock()
	if logged != 3 {
		t.Fatalf("%d WRs in the backup log after the post, want 3 (the test needs them there)", logged)
	}
	ws := waitN(t, ha.cq, 4)
	// The errors may reach the application before the engine's transition ends.
	waitFor(t, "the QP failed", func() bool { return qa.SendState() == SendFailed },
		func() string { return fmt.Sprintf("state %v err %v", qa.SendState(), qa.Err()) })
	e.cl.Hosts[0].Devices[1].NIC().Kill()
	waitFor(t, "the death seen", func() bool {
		qa.fifoMu.Lock()
		defer qa.fifoMu.Unlock()
		return qa.sets[0].deadFlushed
	}, func() string { return fmt.Sprintf("state %v err %v", qa.SendState(), qa.Err()) })
	ws = append(ws, pollAWhile(ha.cq)...)
	seen := map[uint64]int{}
	for _, w := range ws {
		seen[w.WRID]++
		if seen[w.WRID] > 1 {
			t.Fatalf("wr_id %d completed twice: %+v", w.WRID, ws)
		}
	}
	for _, id := range []uint64{10, 11, 12, 30} {
		if seen[id] != 1 {
			t.Fatalf("wr_id %d completed %d times: %+v", id, seen[id], ws)
		}
	}
}

// TestBackupTakenForHungStillFlushes: a QP runs on its only backup with three WRITEs and a
// receive outstanding there (the peer's backup NIC hangs: no ACK) when the watchdog takes
// this side's backup NIC for hung (takeBackupDead, as backupHung does). The QP fails and
// SHIFT completes the four itself, as a dead device writes nothing (flushDeadSetLocked);
// but this NIC is alive, and moving its QP to ERR makes it write their flushes too. Those
// must be dropped: each WR completed twice (simulation seed 345712, a backup taken for hung
// while its CQEs were held late).
func TestBackupTakenForHungStillFlushes(t *testing.T) {
	e, qa, ha, hb := switchedPair(t)
	write := writes(t, qa, ha, hb)
	if err := qa.PostRecv([]verbs.RecvWR{{WRID: 30, SGL: []verbs.SGE{ha.mr.SGE(512, 64)}}}); err != nil {
		t.Fatal(err)
	}
	e.cl.Hosts[1].Devices[1].NIC().Hang()
	if err := qa.PostSend([]verbs.SendWR{write(10, 64, 0), write(11, 128, verbs.SendSignaled), write(12, 192, verbs.SendSignaled)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the inbox posted", func() bool { return qa.box.nSend.Load() == 0 }, func() string { return "" })
	ha.ctx.takeBackupDead(ha.ctx.bks[0])
	waitFor(t, "the QP failed and its set flushed", func() bool {
		qa.fifoMu.Lock()
		defer qa.fifoMu.Unlock()
		return qa.SendState() == SendFailed && qa.sets[0].deadFlushed
	}, func() string { return fmt.Sprintf("state %v err %v", qa.SendState(), qa.Err()) })
	// The NIC's own flushes come after the modify to ERR, as it passes over the QP: wait
	// until SHIFT's pollers have taken them off the backup QP (none outstanding).
	b := qa.sets[0].qp.Load()
	waitFor(t, "the backup NIC's flushes written", func() bool { return len(b.OutstandingSends(nil)) == 0 },
		func() string {
			return fmt.Sprintf("%d sends outstanding on the backup QP", len(b.OutstandingSends(nil)))
		})
	ws := pollAWhile(ha.cq)
	seen := map[uint64]int{}
	for _, w := range ws {
		seen[w.WRID]++
	}
	for _, id := range []uint64{10, 11, 12, 30} {
		if seen[id] != 1 {
			t.Fatalf("wr_id %d completed %d times: %+v", id, seen[id], ws)
		}
	}
	if len(ws) != 4 {
		t.Fatalf("%d completions, want 4: %+v", len(ws), ws)
	}
}

// pollAWhile polls cq for about 20 ms and returns what it got: what SHIFT completes itself
// is in the CQ's buffer at once, and a duplicate a device writes later comes within it.
func pollAWhile(cq *CQ) []verbs.WC {
	var ws []verbs.WC
	var wc [8]verbs.WC
	for range 20 {
		n, _ := cq.Poll(wc[:])
		ws = append(ws, wc[:n]...)
		time.Sleep(time.Millisecond)
	}
	return ws
}
