package provider_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// manyQPs is how many QPs TestManyQPsOneContext puts on each of its two contexts: far more
// than the 16 bfregs libmlx5 asks for, as NCCL and perftest create.
const manyQPs = 300

// 300 QPs on one context (with libmlx5's default 16 bfregs: 4 dedicated, 11 shared medium
// ones, bfreg 0 unused) carry RDMA WRITEs on all of them at once, one goroutine per QP and
// both directions, so QPs sharing a register ring it concurrently under its lock. Every WRITE
// completes and every byte arrives: no doorbell is lost on a shared register.
func TestManyQPsOneContext(t *testing.T) {
	tb := newTestbed(t)
	const (
		slot   = 4096 // bytes of the buffer per QP
		msgs   = 8    // WRITEs per QP
		msgLen = slot / msgs
	)
	type end struct {
		ctx *provider.Context
		pd  *provider.PD
		buf *provider.Buffer
		mr  *provider.MR
		cqs []*provider.CQ
		qps []*provider.QP
	}
	open := func(name string) *end {
		e := &end{}
		var err error
		if e.ctx, err = provider.Open(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.ctx.Close() })
		if e.pd, err = as[*provider.PD](e.ctx.AllocPD()); err != nil {
			t.Fatal(err)
		}
		if e.buf, err = provider.NewBuffer(2 * manyQPs * slot); err != nil {
			t.Fatal(err)
		}
		if e.mr, err = as[*provider.MR](e.pd.RegMR(e.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)); err != nil {
			t.Fatal(err)
		}
		shared := map[uint32]int{}
		for i := range manyQPs {
			cq, err := as[*provider.CQ](e.ctx.CreateCQ(verbs.CQInitAttr{CQE: 2 * msgs}))
			if err != nil {
				t.Fatalf("CQ %d: %v", i, err)
			}
			q, err := as[*provider.QP](e.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
				Cap: verbs.QPCap{MaxSendWR: msgs, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))
			if err != nil {
				t.Fatalf("QP %d of one context: %v", i, err)
			}
			if g, lock := provider.QPBfreg(q); lock {
				shared[g]++
			}
			e.cqs, e.qps = append(e.cqs, cq), append(e.qps, q)
		}
		// 4 low-latency QPs, the rest spread evenly over the 11 medium bfregs.
		n := 0
		for g, k := range shared {
			n += k
			if k < (manyQPs-4)/11 || k > (manyQPs-4+10)/11 {
				t.Errorf("bfreg %d carries %d QPs: not spread evenly", g, k)
			}
		}
		if len(shared) != 11 || n != manyQPs-4 {
			t.Errorf("%d QPs on %d shared bfregs, want %d on 11", n, len(shared), manyQPs-4)
		}
		t.Cleanup(func() {
			for i := range e.qps {
				if e.qps[i].Destroy() != nil || e.cqs[i].Destroy() != nil {
					t.Errorf("teardown of QP %d failed", i)
				}
			}
			e.mr.Dereg()
			e.pd.Dealloc()
			e.buf.Free()
		})
		return e
	}
	a, b := open(tb.names[0]), open(tb.names[1])
	// The ACK timer runs on the real clock and nothing is lost on this fabric: a timeout is
	// the machine stalling under 600 busy QPs (race detector, loaded cores), so allow ~1 s per
	// try (4.096 us * 2^18) instead of the default 67 ms.
	attr := verbs.ConnectAttr{GIDIndex: tb.gid, Timeout: 18}
	gid := func(e *end) [16]byte {
		g, err := e.ctx.GIDByIndex(attr.Defaults().Port, int(attr.GIDIndex))
		if err != nil {
			t.Fatal(err)
		}
		return g.GID
	}
	ga, gb := gid(a), gid(b)
	for i := range manyQPs {
		ea := verbs.Endpoint{QPN: a.qps[i].QPN(), PSN: uint32(i), GID: ga}
		eb := verbs.Endpoint{QPN: b.qps[i].QPN(), PSN: uint32(i) + 7, GID: gb}
		if err := verbs.Connect(a.qps[i], attr, ea, eb); err != nil {
			t.Fatal(err)
		}
		if err := verbs.Connect(b.qps[i], attr, eb, ea); err != nil {
			t.Fatal(err)
		}
	}
	// Each side's buffer: the first half is what its QPs send, the second what they receive.
	fill(a.buf.Bytes()[:manyQPs*slot], 31)
	fill(b.buf.Bytes()[:manyQPs*slot], 32)

	var wg sync.WaitGroup
	errs := make(chan error, 2*manyQPs)
	run := func(from, to *end, i int) {
		defer wg.Done()
		q, cq := from.qps[i], from.cqs[i]
		for m := range msgs {
			off := i*slot + m*msgLen
			// Every other WRITE signaled; the last always, so the CQ ends with msgs/2.
			fl := verbs.SendFlags(0)
			if m%2 == 1 {
				fl = verbs.SendSignaled
			}
			if err := q.PostSend([]verbs.SendWR{{WRID: uint64(m), Opcode: verbs.WRRDMAWrite, Flags: fl,
				SGL:        []verbs.SGE{from.mr.SGE(off, msgLen)},
				RemoteAddr: to.mr.Addr() + uint64(manyQPs*slot+off), RKey: to.mr.RKey()}}); err != nil {
				errs <- fmt.Errorf("QP %d WRITE %d: %w", i, m, err)
				return
			}
		}
		var wc [msgs]verbs.WC
		got := 0
		deadline := time.Now().Add(60 * time.Second) // failure guard only
		for got < msgs/2 {
			k, err := cq.Poll(wc[got:])
			if err != nil {
				errs <- fmt.Errorf("QP %d poll: %w", i, err)
				return
			}
			for _, w := range wc[got : got+k] {
				if w.Status != verbs.WCSuccess {
					errs <- fmt.Errorf("QP %d: %+v", i, w)
					return
				}
			}
			got += k
			if k == 0 {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("QP %d: %d of %d completions after the guard timeout (a lost doorbell?)", i, got, msgs/2)
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	start := time.Now()
	for i := range manyQPs {
		wg.Add(2)
		go run(a, b, i)
		go run(b, a, i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d QPs per context, %d WRITEs of %d B each way, in %v", manyQPs, manyQPs*msgs, msgLen, time.Since(start))
	if !bytes.Equal(b.buf.Bytes()[manyQPs*slot:], a.buf.Bytes()[:manyQPs*slot]) {
		t.Error("data written from a differs at b")
	}
	if !bytes.Equal(a.buf.Bytes()[manyQPs*slot:], b.buf.Bytes()[:manyQPs*slot]) {
		t.Error("data written from b differs at a")
	}
}
