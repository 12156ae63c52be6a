package failover

// The boundary of transparent failover, case by case: the theorems of the formal model and
// the communication patterns of the paper's §3.1, each run against the implementation on the
// emulated fabric. docs/FAILOVER.md "The boundary, case by case" maps every case to its test.
//
// What these tests observe about the receiver's memory they observe at packet boundaries: a
// fabric tap sees every packet just before the receiving NIC executes it, on the goroutine
// that executes it, so a snapshot taken there is exactly what the receiver's memory held
// between two packets of that NIC. They cannot see states inside one packet's DMA (a real
// NIC's PCIe writes, a GPU's view of them), and they do not model a receiver that acts on
// what it reads while the retransmission runs; where that matters the test says so.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Offsets in the hosts' buffers, clear of what the fixture's other users touch.
const (
	thSrc  = 1 << 20       // the sender's source slots
	thDst  = 1<<20 + 65536 // the receiver's target memory
	thFlag = thDst + 4096  // a separate flag word (flag-after-data, NVSHMEM's signal)
)

// deliveryTap calls fn for every packet about to be executed by one of host h's NICs,
// serialised by the returned mutex (hold it to read what fn records). backup says which NIC.
func deliveryTap(t *testing.T, e *testEnv, h int, fn func(p *roce.Packet, backup bool)) *sync.Mutex {
	t.Helper()
	def, bk := e.cl.Endpoint(h, 0, 1).Addr(), e.cl.Endpoint(h, 1, 1).Addr()
	mu := new(sync.Mutex)
	e.cl.Fabric.SetTap(func(_ time.Time, where fabric.TapPoint, p *roce.Packet) {
		if where != fabric.TapDelivered || (p.DstIP != def && p.DstIP != bk) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fn(p, p.DstIP == bk)
	})
	// Registered after the cluster's cleanup, so it runs first: no tap outlives the test.
	t.Cleanup(func() { e.cl.Fabric.SetTap(nil) })
	return mu
}

// isWriteOrAtomic reports whether p is a request that writes the responder's memory.
func isWriteOrAtomic(p *roce.Packet) bool {
	switch p.BTH.Opcode {
	case roce.WriteFirst, roce.WriteMiddle, roce.WriteLast, roce.WriteLastWithImmediate, roce.WriteOnly,
		roce.WriteOnlyWithImmediate, roce.CompareSwap, roce.FetchAdd:
		return true
	}
	return false
}

// waitMem polls the receiver's memory until cond holds, as a GPU kernel polls a flag
// (failure guard only).
func waitMem(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, cond, func() string { return "the memory never changed" })
}

// pollUntil polls cq until a completion with wr_id wrid arrives and returns every completion
// seen up to it.
func pollUntil(t *testing.T, cq *CQ, wrid uint64) []verbs.WC {
	t.Helper()
	p := &poller{t: t, cq: cq}
	deadline := time.Now().Add(60 * time.Second)
	var out []verbs.WC
	for {
		ws := p.next(deadline)
		if ws == nil {
			t.Fatalf("timed out waiting for wr_id %d; completions so far %+v", wrid, out)
		}
		out = append(out, ws...)
		for _, w := range ws {
			if w.WRID == wrid {
				return out
			}
		}
	}
}

// refused checks that the application got the failure as without SHIFT: no success among
// the completions of the WRs, an error first, the QP failed as not retransmission-safe and
// nothing reposted on the backup.
func refused(t *testing.T, e *testEnv, q *QP, ws []verbs.WC) {
	t.Helper()
	for _, w := range ws {
		if w.Status == verbs.WCSuccess {
			t.Fatalf("completion %+v: a WR outstanding at the failure succeeded, want the error (completions %+v)", w, ws)
		}
	}
	if ws[0].Status == verbs.WCWRFlushErr {
		t.Fatalf("first completion %+v: want the original error", ws[0])
	}
	if q.SendState() != SendFailed || !errors.Is(q.Err(), ErrNotSafe) {
		t.Fatalf("state %v err %v: want Failed with ErrNotSafe", q.SendState(), q.Err())
	}
	if s := e.hosts[0].ctx.Stats(); s.Reposted != 0 || s.Refused != 1 {
		t.Fatalf("stats %+v: want one refusal and nothing reposted", s)
	}
}

// Theorem 1 (indistinguishability): a WRITE whose packet was lost and one whose ACK was lost
// look the same to the sender (sent, then a timeout), so a transparent overlay decides the
// same for both. SHIFT retransmits both (liveness wins); in the ACK-lost trace the WRITE
// therefore executes twice, which is harmless only because nothing used the target in
// between — the cases below (LL, flag-after-data) are where that stops being true.
func TestTheorem1IndistinguishableLoss(t *testing.T) {
	for _, lost := range []string{"packet", "ack"} {
		t.Run(lost+"-lost", func(t *testing.T) {
			e := newEnv(t, 256)
			a, _ := e.pairs(t, 1, smallCap)
			qa := a[0]
			ha, hb := e.hosts[0], e.hosts[1]
			const size = 256
			payload(ha.buf.Bytes()[thSrc:thSrc+size], 31, 1)
			want := ha.buf.Bytes()[thSrc : thSrc+size]
			var execDef, execBk int
			mu := deliveryTap(t, e, 1, func(p *roce.Packet, backup bool) {
				if p.Has&roce.HasRETH != 0 && p.RETH.VA == hb.mr.Addr()+thDst && isWriteOrAtomic(p) {
					if backup {
						execBk++
					} else {
						execDef++
					}
				}
			})
			if lost == "packet" {
				e.cl.Endpoint(0, 0, 1).Faults(fabric.TX).SetBlackhole(true)
			} else {
				e.cl.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
			}
			if err := qa.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{ha.mr.SGE(thSrc, size)}, RemoteAddr: hb.mr.Addr() + thDst, RKey: hb.mr.RKey()}}); err != nil {
				t.Fatal(err)
			}
			if lost == "ack" {
				// The data landed: only the sender does not know it.
				waitMem(t, "the WRITE to land", func() bool { return bytes.Equal(hb.buf.Bytes()[thDst:thDst+size], want) })
			}
			if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 1 {
				t.Fatalf("completion %+v", w)
			}
			if !bytes.Equal(hb.buf.Bytes()[thDst:thDst+size], want) {
				t.Fatal("target memory differs from the WRITE's data")
			}
			// The same decision for both traces: one WR reposted, none skipped or refused.
			if s := ha.ctx.Stats(); s.Reposted != 1 || s.Skipped != 0 || s.Refused != 0 || qa.SendState() != SendFallback {
				t.Fatalf("stats %+v state %v: want exactly one WR reposted", s, qa.SendState())
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case execBk != 1:
				t.Fatalf("the backup NIC got the WRITE %d times, want 1", execBk)
			case lost == "packet" && execDef != 0:
				t.Fatalf("the blackholed path delivered the WRITE %d times", execDef)
			case lost == "ack" && execDef == 0:
				t.Fatal("the ACK-lost trace never delivered the WRITE on the default path")
			}
		})
	}
}

// llLayout is an NCCL low-latency line format: each unit carries its own flag next to its
// data, so a receiver that sees the flag of step s in a unit consumes that unit's data at
// once (no completion, no separate notification).
type llLayout struct {
	name    string
	unit    int // bytes per flagged unit
	flagOff int // the flag's offset in a unit (the rest is data)
	flagLen int
}

// LL: 8-byte words of 4 data + 4 flag bytes; LL128: 128-byte lines of 120 data + 8 flag
// bytes (paper Table 1).
var llLayouts = []llLayout{{"LL", 8, 4, 4}, {"LL128", 128, 120, 8}}

// llBytes is one step's WRITE: 32 LL words or 2 LL128 lines, one packet at any path MTU.
const llBytes = 256

func (l llLayout) flag(u []byte) uint64 {
	if l.flagLen == 4 {
		return uint64(binary.LittleEndian.Uint32(u[l.flagOff:]))
	}
	return binary.LittleEndian.Uint64(u[l.flagOff:])
}

// fill writes step s's line into b: every unit's data (distinct per step and unit) and flag.
func (l llLayout) fill(b []byte, step uint64) {
	for i := 0; i < len(b); i += l.unit {
		u := b[i : i+l.unit]
		payload(u[:l.flagOff], 1000+step, uint64(i))
		if l.flagLen == 4 {
			binary.LittleEndian.PutUint32(u[l.flagOff:], uint32(step))
		} else {
			binary.LittleEndian.PutUint64(u[l.flagOff:], step)
		}
	}
}

// state is the step the whole line shows (0: never written), or -1 when its units disagree
// or a unit's data is not the data of the step its flag names: a torn or corrupt line.
func (l llLayout) state(b []byte) int {
	st := -1
	want := make([]byte, l.flagOff)
	for i := 0; i < len(b); i += l.unit {
		u := b[i : i+l.unit]
		f := l.flag(u)
		if f == 0 {
			clear(want)
		} else {
			payload(want, 1000+f, uint64(i))
		}
		if !bytes.Equal(u[:l.flagOff], want) || (st >= 0 && uint64(st) != f) {
			return -1
		}
		st = int(f)
	}
	return st
}

// NCCL LL and LL128 (paper §3.1, Table 1: "vulnerable"): data and flag travel in the same
// WRITE and the receiver consumes a unit as soon as its flag shows. The sender writes step 1
// into a line, the receiver consumes it, the sender reuses the line for step 2, the receiver
// consumes that too — and every ACK of the default path was lost, so at the failure both
// WRITEs are outstanding for the sender (theorem 1's ACK-lost trace).
//
// With the ineligible hint on the WRITEs, the error must surface and the line must keep
// step 2. Without it SHIFT retransmits both WRITEs on the backup (it cannot tell this trace
// from one where they were lost): the end state is exactly a plain run's (step 2, byte for
// byte), but between the two reposted WRITEs the line shows step 1 again — a state a plain
// run never produces, observed here at the packet boundary. A receiver that polls for step
// 3 and compares with ==, as NCCL does, ignores it; one whose flags wrap or that clears the
// line after consuming it would take the old step for a new one. That is why the boundary
// needs the hint for LL/LL128; the test checks that the hazard is real (the implementation
// does retransmit) and that the hint closes it. It cannot check what a receiver acting
// during the retransmission would do with the stale line.
func TestNCCLLLPatterns(t *testing.T) {
	for _, l := range llLayouts {
		for _, hint := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/hint=%v", l.name, hint), func(t *testing.T) { testLL(t, l, hint) })
		}
	}
}

func testLL(t *testing.T, l llLayout, hint bool) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	line := hb.buf.Bytes()[thDst : thDst+llBytes]
	src := func(step int) int { return thSrc + step*llBytes } // NCCL's staging, one per step
	for s := 1; s <= 2; s++ {
		l.fill(ha.buf.Bytes()[src(s):src(s)+llBytes], uint64(s))
	}
	var flags verbs.SendFlags
	if hint {
		flags = SendIneligible
	}
	e.cl.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
	post := func(step int, extra verbs.SendFlags) {
		t.Helper()
		if err := qa.PostSend([]verbs.SendWR{{WRID: uint64(step), Opcode: verbs.WRRDMAWrite, Flags: flags | extra,
			SGL: []verbs.SGE{ha.mr.SGE(src(step), llBytes)}, RemoteAddr: hb.mr.Addr() + thDst, RKey: hb.mr.RKey()}}); err != nil {
			t.Fatal(err)
		}
	}
	post(1, 0)
	waitMem(t, "the receiver to see step 1", func() bool { return l.state(line) == 1 })
	post(2, verbs.SendSignaled)
	waitMem(t, "the receiver to see step 2", func() bool { return l.state(line) == 2 })
	// From here on, record the line as the receiver could see it between any two packets.
	var seen []int
	mu := deliveryTap(t, e, 1, func(*roce.Packet, bool) { seen = append(seen, l.state(line)) })
	ws := pollUntil(t, ha.cq, 2)
	mu.Lock()
	seen = append(seen, l.state(line))
	got := append([]int(nil), seen...)
	mu.Unlock()
	for _, s := range got {
		if s < 0 {
			t.Fatalf("line states %v: a torn or corrupt line at a packet boundary", got)
		}
	}
	if hint {
		refused(t, e, qa, ws)
		for _, s := range got {
			if s != 2 {
				t.Fatalf("line states %v: the line left step 2 although the failure was refused", got)
			}
		}
		return
	}
	if w := ws[len(ws)-1]; len(ws) != 1 || w.Status != verbs.WCSuccess {
		t.Fatalf("completions %+v: want step 2's success only", ws)
	}
	if s := ha.ctx.Stats(); s.Reposted != 2 || qa.SendState() != SendFallback {
		t.Fatalf("stats %+v state %v: want both outstanding WRITEs reposted", s, qa.SendState())
	}
	if !bytes.Equal(line, ha.buf.Bytes()[src(2):src(2)+llBytes]) {
		t.Fatal("end state differs from a plain run's (step 2)")
	}
	regressed := false
	for i := 1; i < len(got); i++ {
		regressed = regressed || got[i] < got[i-1]
	}
	if !regressed {
		t.Fatalf("line states %v: the retransmission of step 1 over step 2 was not observed; if SHIFT no longer "+
			"retransmits WRITEs whose ACK was lost, theorem 1 says it now loses WRITEs whose packets were lost", got)
	}
	t.Logf("line states at packet boundaries without the hint: %v", got)
}

// Flag after data in separate WRITEs (paper §3.1 case (1), NCCL's reverse CTS, any
// pure-WRITE notification): the receiver polls a flag word, then reads the data. The
// failure hits between data and flag: either the data WRITE landed (its ACK lost) and the
// flag's packet was lost, or nothing landed. With the ineligible hint the error surfaces
// and the flag is never written. Without it both WRITEs are reposted in order: at every
// packet boundary the flag is set only over the complete data, the data region only ever
// holds nothing or the data (the retransmission rewrites identical bytes the receiver does
// not read before the flag: it cannot be observed), and the end state is a plain run's.
func TestFlagAfterData(t *testing.T) {
	for _, landed := range []bool{true, false} {
		for _, hint := range []bool{true, false} {
			t.Run(fmt.Sprintf("data-landed=%v/hint=%v", landed, hint), func(t *testing.T) { testFlagAfterData(t, landed, hint) })
		}
	}
}

func testFlagAfterData(t *testing.T, landed, hint bool) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	const size = 512
	payload(ha.buf.Bytes()[thSrc:thSrc+size], 41, 1)
	binary.LittleEndian.PutUint64(ha.buf.Bytes()[thSrc+size:], 1)
	data, want := hb.buf.Bytes()[thDst:thDst+size], ha.buf.Bytes()[thSrc:thSrc+size]
	flag := func() uint64 { return binary.LittleEndian.Uint64(hb.buf.Bytes()[thFlag:]) }
	var bad []string
	mu := deliveryTap(t, e, 1, func(p *roce.Packet, backup bool) {
		zero := bytes.Count(data, []byte{0}) == size
		switch {
		case !zero && !bytes.Equal(data, want):
			bad = append(bad, fmt.Sprintf("data region neither empty nor the data (backup %v)", backup))
		case flag() != 0 && !bytes.Equal(data, want):
			bad = append(bad, fmt.Sprintf("flag %d set over incomplete data (backup %v)", flag(), backup))
		}
	})
	if landed {
		// The data WRITE's one packet passes; the flag's and every retry are lost, and so
		// is every ACK: the data landed without the sender knowing.
		var passed atomic.Int64
		e.cl.Endpoint(0, 0, 1).Faults(fabric.TX).SetFilter(func(*roce.Packet) bool { return passed.Add(1) > 1 })
		e.cl.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
	} else {
		e.cl.Endpoint(0, 0, 1).Faults(fabric.TX).SetBlackhole(true)
	}
	var flags verbs.SendFlags
	if hint {
		flags = SendIneligible
	}
	if err := qa.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: flags, SGL: []verbs.SGE{ha.mr.SGE(thSrc, size)},
			RemoteAddr: hb.mr.Addr() + thDst, RKey: hb.mr.RKey()},
		{WRID: 2, Opcode: verbs.WRRDMAWrite, Flags: flags | verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(thSrc+size, 8)},
			RemoteAddr: hb.mr.Addr() + thFlag, RKey: hb.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	if landed {
		waitMem(t, "the data to land", func() bool { return bytes.Equal(data, want) })
		if flag() != 0 {
			t.Fatal("the flag landed although its packet was dropped")
		}
	}
	ws := pollUntil(t, ha.cq, 2)
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("receiver-visible states a plain run never produces: %v", bad)
	}
	if hint {
		refused(t, e, qa, ws)
		if flag() != 0 {
			t.Fatal("flag written although the fallback was refused")
		}
		return
	}
	if w := ws[len(ws)-1]; len(ws) != 1 || w.Status != verbs.WCSuccess {
		t.Fatalf("completions %+v: want the flag WRITE's success only", ws)
	}
	if flag() != 1 || !bytes.Equal(data, want) {
		t.Fatalf("end state: flag %d, data right %v", flag(), bytes.Equal(data, want))
	}
	if s := ha.ctx.Stats(); s.Reposted != 2 {
		t.Fatalf("stats %+v: want both WRITEs reposted", s)
	}
}

// NVSHMEM / MSCCL++ (paper §3.1 (2), Table 1): data by WRITE (put), notification by an
// atomic on a signal word (put_signal with SIGNAL_ADD). An atomic outstanding at the failure
// must not be retried (theorem 2): the error surfaces, the signal moved once, and nothing —
// the put included — is retransmitted. With a quiet between put and signal (the put's
// completion awaited first), the failure finds only the put outstanding: it is retransmitted
// and the signal, posted after the fallback, runs on the backup over complete data.
func TestNVSHMEMPutSignal(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiet=%v", quiet), func(t *testing.T) { testPutSignal(t, quiet) })
	}
}

func testPutSignal(t *testing.T, quiet bool) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	const size = 512
	payload(ha.buf.Bytes()[thSrc:thSrc+size], 51, 1)
	data, want := hb.buf.Bytes()[thDst:thDst+size], ha.buf.Bytes()[thSrc:thSrc+size]
	signal := func() uint64 { return binary.LittleEndian.Uint64(hb.buf.Bytes()[thFlag:]) }
	var bkWrites, earlySignal int
	mu := deliveryTap(t, e, 1, func(p *roce.Packet, backup bool) {
		if p.BTH.Opcode == roce.FetchAdd && !bytes.Equal(data, want) {
			earlySignal++
		}
		if backup && isWriteOrAtomic(p) {
			bkWrites++
		}
	})
	put := verbs.SendWR{WRID: 1, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(thSrc, size)},
		RemoteAddr: hb.mr.Addr() + thDst, RKey: hb.mr.RKey()}
	sig := verbs.SendWR{WRID: 2, Opcode: verbs.WRAtomicFetchAdd, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(thSrc+size, 8)},
		RemoteAddr: hb.mr.Addr() + thFlag, RKey: hb.mr.RKey(), CompareAdd: 1}
	if !quiet {
		// Put and signal execute, their ACKs are lost: the receiver already consumed.
		e.cl.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
		if err := qa.PostSend([]verbs.SendWR{put, sig}); err != nil {
			t.Fatal(err)
		}
		waitMem(t, "the signal", func() bool { return signal() == 1 })
		if !bytes.Equal(data, want) {
			t.Fatal("signal set over incomplete data")
		}
		ws := pollUntil(t, ha.cq, 2)
		refused(t, e, qa, ws)
		mu.Lock()
		defer mu.Unlock()
		if signal() != 1 || bkWrites != 0 {
			t.Fatalf("signal %d, %d WRITEs or atomics reached the backup NIC: want 1 and none", signal(), bkWrites)
		}
		return
	}
	e.cl.Endpoint(0, 0, 1).Faults(fabric.TX).SetBlackhole(true)
	put.Flags = verbs.SendSignaled
	if err := qa.PostSend([]verbs.SendWR{put}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 1 {
		t.Fatalf("put completion %+v", w)
	}
	if qa.SendState() != SendFallback {
		t.Fatalf("state %v after the quiet", qa.SendState())
	}
	if err := qa.PostSend([]verbs.SendWR{sig}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ha.cq, 1)[0]; w.Status != verbs.WCSuccess || w.WRID != 2 {
		t.Fatalf("signal completion %+v", w)
	}
	mu.Lock()
	defer mu.Unlock()
	if old := binary.LittleEndian.Uint64(ha.buf.Bytes()[thSrc+size:]); signal() != 1 || old != 0 || earlySignal != 0 || !bytes.Equal(data, want) {
		t.Fatalf("signal %d (fetched %d), %d signals before the data, data right %v", signal(), old, earlySignal, bytes.Equal(data, want))
	}
}

// Theorem 2 (CAS, the ABA problem) and theorem 3 (no read-based verification): a CAS(0→1)
// executes, its response is lost, and a third party sets the word back to 0 (host CPU
// here). A retried CAS would find 0 and swap again, silently undoing the third party's
// write; reading the word cannot tell executed-then-reverted from never executed. SHIFT
// neither retries nor reads: the error surfaces, the word stays 0, and no READ request
// reaches the peer on either NIC.
func TestCASNotRetriedABA(t *testing.T) {
	e := newEnv(t, 256)
	a, _ := e.pairs(t, 1, smallCap)
	qa := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	word := func() uint64 { return binary.LittleEndian.Uint64(hb.buf.Bytes()[thFlag:]) }
	var reads, bkCAS int
	mu := deliveryTap(t, e, 1, func(p *roce.Packet, backup bool) {
		if p.BTH.Opcode == roce.ReadRequest {
			reads++
		}
		if backup && p.BTH.Opcode == roce.CompareSwap {
			bkCAS++
		}
	})
	e.cl.Endpoint(1, 0, 1).Faults(fabric.TX).SetDropAcks(true)
	if err := qa.PostSend([]verbs.SendWR{{WRID: 7, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ha.mr.SGE(thSrc, 8)}, RemoteAddr: hb.mr.Addr() + thFlag, RKey: hb.mr.RKey(), CompareAdd: 0, Swap: 1}}); err != nil {
		t.Fatal(err)
	}
	waitMem(t, "the CAS to execute", func() bool { return word() == 1 })
	// The third party's CAS(1→0), done by the host: the NIC has nothing in flight on it.
	mu.Lock()
	binary.LittleEndian.PutUint64(hb.buf.Bytes()[thFlag:], 0)
	mu.Unlock()
	ws := pollUntil(t, ha.cq, 7)
	refused(t, e, qa, ws)
	mu.Lock()
	defer mu.Unlock()
	if word() != 0 || bkCAS != 0 || reads != 0 {
		t.Fatalf("word %d, %d CAS on the backup, %d READ requests: want 0, none, none", word(), bkCAS, reads)
	}
}

// Two-sided handshake, refused on the peer (paper §4.3.2: the retransmission-safe check runs
// on each side before it reposts): side A fails over and notifies; side B, on A's
// notification, finds its own outstanding WR marked ineligible and refuses. Neither side may
// then run on the backup: B's application gets its error at once, and B answers A's
// notification with a refusal, so A's gets its error then too. The handshake timeout is far
// longer than pollUntil's deadline: A's error can only come from the refusal. Nothing hangs
// and nothing is delivered twice.
func TestPeerRefusesHandshake(t *testing.T) {
	const hsTimeout = 10 * time.Minute
	e := newEnvWith(t, 256, func(h int, o *Options) { o.HandshakeTimeout = hsTimeout })
	a, b := e.pairs(t, 1, smallCap)
	qa, qb := a[0], b[0]
	ha, hb := e.hosts[0], e.hosts[1]
	if err := qb.PostRecv([]verbs.RecvWR{{WRID: 100, SGL: []verbs.SGE{hb.mr.SGE(thDst, 64)}}}); err != nil {
		t.Fatal(err)
	}
	e.linkDown(0)
	if err := qb.PostSend([]verbs.SendWR{{WRID: 20, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | SendIneligible,
		SGL: []verbs.SGE{hb.mr.SGE(thSrc, 64)}, RemoteAddr: ha.mr.Addr() + thDst, RKey: ha.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend([]verbs.SendWR{{WRID: 10, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ha.mr.SGE(thSrc, 64)}}}); err != nil {
		t.Fatal(err)
	}
	// Only A polls: B learns of the failure from A's notification alone.
	start := time.Now()
	wa := pollUntil(t, ha.cq, 10)
	took := time.Since(start)
	for _, w := range wa {
		if w.Status == verbs.WCSuccess {
			t.Fatalf("A: completion %+v succeeded, want the error", w)
		}
	}
	if qa.SendState() != SendFailed || !strings.Contains(fmt.Sprint(qa.Err()), "peer refused") {
		t.Fatalf("A: state %v err %v: want the peer's refusal", qa.SendState(), qa.Err())
	}
	if !errors.Is(qb.Err(), ErrNotSafe) {
		t.Fatalf("B: state %v err %v: want the refusal", qb.SendState(), qb.Err())
	}
	wb := pollUntil(t, hb.cq, 20)
	for _, w := range wb {
		if w.Status == verbs.WCSuccess {
			t.Fatalf("B: completion %+v succeeded, want errors (completions %+v)", w, wb)
		}
	}
	if s := hb.ctx.Stats(); s.Reposted != 0 || s.Refused != 1 {
		t.Fatalf("B stats %+v", s)
	}
	t.Logf("A got its error after %v (handshake timeout %v): %v", took.Round(time.Microsecond), hsTimeout, qa.Err())
}

// Two-sided handshake, both sides first (paper §3.2 C#2, §4.3.2: "both sides detecting the
// failure independently converge"): each side finds its own SEND failed and notifies before
// the peer's notification can reach it, so each takes the other's notification for its
// reply. The backup path is blackholed until both are in Handshake, which forces the
// crossing; the control QPs' retransmissions deliver the notifications once it lifts. Each
// SEND must then arrive exactly once, in its posted receive, on both sides.
func TestHandshakeCrossingNotifications(t *testing.T) {
	e := newEnv(t, 256)
	// Retries long enough that the blackholed control QPs outlast the wait for both sides.
	e.attr.Timeout, e.attr.RetryCnt = 14, 7
	a, b := e.pairs(t, 1, smallCap)
	qs := [2]*QP{a[0], b[0]}
	const size = 64
	for h, hs := range e.hosts {
		payload(hs.buf.Bytes()[thSrc:thSrc+size], 61, uint64(h))
		if err := qs[h].PostRecv([]verbs.RecvWR{{WRID: 100, SGL: []verbs.SGE{hs.mr.SGE(thDst, size)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for h := range 2 {
		e.cl.Endpoint(h, 1, 1).Faults(fabric.TX).SetBlackhole(true)
	}
	e.linkDown(0)
	for h, hs := range e.hosts {
		if err := qs[h].PostSend([]verbs.SendWR{{WRID: uint64(10 + h), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{hs.mr.SGE(thSrc, size)}}}); err != nil {
			t.Fatal(err)
		}
	}
	var got [2][]verbs.WC
	poll := func() { e.pollHosts(t, &got) }
	waitFor(t, "both sides to notify", func() bool {
		poll()
		return qs[0].SendState() == SendHandshake && qs[1].SendState() == SendHandshake
	}, func() string { return fmt.Sprintf("states %v %v", qs[0].SendState(), qs[1].SendState()) })
	for h := range 2 {
		e.cl.Endpoint(h, 1, 1).Faults(fabric.TX).SetBlackhole(false)
	}
	waitFor(t, "two completions on each side", func() bool {
		poll()
		return len(got[0]) >= 2 && len(got[1]) >= 2
	}, func() string { return fmt.Sprintf("completions %+v %+v", got[0], got[1]) })
	expectNoMore(t, e.hosts[0].cq)
	expectNoMore(t, e.hosts[1].cq)
	for h, hs := range e.hosts {
		want := make([]byte, size)
		payload(want, 61, uint64(1-h))
		var sends, recvs int
		for _, c := range got[h] {
			switch {
			case c.Status != verbs.WCSuccess:
				t.Fatalf("host %d: completion %+v", h, c)
			case c.WRID == uint64(10+h):
				sends++
			case c.WRID == 100 && c.ByteLen == size && bytes.Equal(hs.buf.Bytes()[thDst:thDst+size], want):
				recvs++
			default:
				t.Fatalf("host %d: completion %+v (data right %v)", h, c, bytes.Equal(hs.buf.Bytes()[thDst:thDst+size], want))
			}
		}
		if sends != 1 || recvs != 1 || qs[h].SendState() != SendFallback || qs[h].SendTransitions(SendDefault, SendHandshake) != 1 {
			t.Fatalf("host %d: %d sends %d receives, state %v", h, sends, recvs, qs[h].SendState())
		}
	}
}
