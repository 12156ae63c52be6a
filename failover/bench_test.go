package failover

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Default-state overhead of the failover layer over the plain provider, on a connected QP of
// the emulated ConnectX. Only the verb itself is timed: the SQ is drained with the timer
// stopped.

type poster interface{ PostSend([]verbs.SendWR) error }

type pollerIface interface{ Poll([]verbs.WC) (int, error) }

func benchPost(b *testing.B, qp poster, cq pollerIface, depth int, w verbs.SendWR) {
	var wcs [64]verbs.WC
	wr := []verbs.SendWR{w}
	inFlight := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wr[0].Flags = 0
		if inFlight == depth-1 {
			wr[0].Flags = verbs.SendSignaled
		}
		if err := qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		inFlight++
		if inFlight == depth {
			b.StopTimer()
			deadline := time.Now().Add(30 * time.Second)
			for got := 0; got < 1; {
				n, err := cq.Poll(wcs[:])
				if err != nil || (n > 0 && wcs[0].Status != verbs.WCSuccess) {
					b.Fatalf("poll: %v %+v", err, wcs[0])
				}
				got += n
				if time.Now().After(deadline) {
					b.Fatal("no completion")
				}
			}
			inFlight = 0
			b.StartTimer()
		}
	}
	b.StopTimer()
}

func benchSetup(b *testing.B) (*testEnv, *QP) {
	e := newEnv(b, 256)
	a, _ := e.pairs(b, 1, verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1})
	return e, a[0]
}

func BenchmarkPostSendFailover(b *testing.B) {
	e, q := benchSetup(b)
	ha, hb := e.hosts[0], e.hosts[1]
	benchPost(b, q, ha.cq, 32, verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()})
}

func BenchmarkPostSendProvider(b *testing.B) {
	e, q := benchSetup(b)
	ha, hb := e.hosts[0], e.hosts[1]
	benchPost(b, q.Default(), ha.cq.Default(), 32, verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()})
}

func benchPollEmpty(b *testing.B, cq pollerIface) {
	var wcs [16]verbs.WC
	b.ReportAllocs()
	for b.Loop() {
		if n, err := cq.Poll(wcs[:]); n != 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkPollEmptyFailover(b *testing.B) {
	e, _ := benchSetup(b)
	benchPollEmpty(b, e.hosts[0].cq)
}

func BenchmarkPollEmptyProvider(b *testing.B) {
	e, _ := benchSetup(b)
	benchPollEmpty(b, e.hosts[0].cq.Default())
}

// dataPathAllocs sums, over the heap profile, the objects allocated with a failover
// data-path function on the stack.
func dataPathAllocs() int64 {
	runtime.GC()
	runtime.GC()
	n, _ := runtime.MemProfile(nil, true)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(recs, true)
	var total int64
	for _, r := range recs[:n] {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if strings.Contains(f.Function, "failover.(*QP).PostSend") || strings.Contains(f.Function, "failover.(*QP).PostRecv") ||
				strings.Contains(f.Function, "failover.(*CQ).Poll") {
				total += r.AllocObjects
				break
			}
			if !more {
				break
			}
		}
	}
	return total
}

// The Default-state data path allocates nothing: PostSend, PostRecv and Poll of the failover
// layer on a connected QP, with every allocation sampled (MemProfileRate 1) and attributed by
// stack, so the emulated NIC's own allocations do not count.
func TestDefaultPathAllocs(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1})
	q := a[0]
	ha, hb := e.hosts[0], e.hosts[1]
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}}}
	rwr := []verbs.RecvWR{{SGL: []verbs.SGE{hb.mr.SGE(4096, 64)}}}
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	before := dataPathAllocs()
	for range 500 {
		if err := b[0].PostRecv(rwr); err != nil {
			t.Fatal(err)
		}
		if err := q.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		waitN(t, ha.cq, 1)
		waitN(t, hb.cq, 1)
	}
	if d := dataPathAllocs() - before; d != 0 {
		t.Errorf("the Default data path allocated %d objects in 500 SEND/RECV rounds, want 0", d)
	}
	if q.SendState() != SendDefault {
		t.Fatalf("state %v", q.SendState())
	}
}

// PostSend once the QP runs on the backup (Fallback state: mutex, key rewrite, backup post).
func BenchmarkPostSendFallback(b *testing.B) {
	e, q := benchSetup(b)
	ha, hb := e.hosts[0], e.hosts[1]
	e.linkDown(0)
	w := verbs.SendWR{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ha.mr.SGE(0, 64)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}
	if err := q.PostSend([]verbs.SendWR{w}); err != nil {
		b.Fatal(err)
	}
	var wcs [4]verbs.WC
	deadline := time.Now().Add(30 * time.Second)
	for q.SendState() != SendFallback || q.FallbackLatency() == 0 {
		if _, err := ha.cq.Poll(wcs[:]); err != nil {
			b.Fatal(err)
		}
		if time.Now().After(deadline) {
			b.Fatalf("no fallback: %v", q.SendState())
		}
	}
	w.Flags = 0
	benchPost(b, q, ha.cq, 32, w)
}
