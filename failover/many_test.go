package failover

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Many QPs fail over at once, both sides sending, in bursts with idle gaps: every message is
// delivered exactly once and in order on every QP.
func TestManyQPsBothSides(t *testing.T) {
	nqp := 256
	if testing.Short() || raceBuild {
		// Under the race detector the emulated NICs run several times slower: 256 QPs
		// starved them past even the control QPs' retry reach (about a second) on the 2-core
		// machine, and the test measured the detector, not SHIFT.
		nqp = 32
	}
	const perPhase, msgSize = 8, 256
	const perQP = 2 * perPhase
	// The emulated NIC gives each QP a doorbell register of its own, 16 per context (the
	// provider asks for libmlx5's default), so the QPs are spread over several contexts.
	const perCtx = 8
	e := newEnv(t, 64)
	// 512 QPs on a loaded 2-core machine: ACK timeouts long enough that a healthy path never
	// runs out of retries. 67 ms × 6 tries (400 ms) was not: in a CI run beside the
	// simulation's package a backup QP exceeded its retries (the emulated NICs starved of the
	// CPU). 134 ms × 8 tries: detection by the RC timer takes about a second.
	e.attr.Timeout, e.attr.RetryCnt = 15, 7
	cp := verbs.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}
	var qps [2][]*QP
	var ctxs [2][]*testHost
	var owner [2][]*testHost // QP i's context
	const ctxBuf = 2 * perCtx * perQP * msgSize
	for g := 0; g < nqp/perCtx; g++ {
		ha, hb := e.openHost(t, 0, 4*perCtx*perQP+64, ctxBuf), e.openHost(t, 1, 4*perCtx*perQP+64, ctxBuf)
		ctxs[0], ctxs[1] = append(ctxs[0], ha), append(ctxs[1], hb)
		for i := range perCtx {
			qa, qb := e.connect(t, ha, hb, cp, uint32(0x100+g*perCtx+i))
			qps[0], qps[1] = append(qps[0], qa), append(qps[1], qb)
			owner[0], owner[1] = append(owner[0], ha), append(owner[1], hb)
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for h := range 2 {
		for _, c := range ctxs[h] {
			if err := c.ctx.WaitShadow(wctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	idx := [2]map[uint32]int{{}, {}}
	for h := range 2 {
		for i, q := range qps[h] {
			idx[h][q.QPN()] = i
		}
	}
	srcOff := func(i, k int) int { return (i%perCtx*perQP + k) * msgSize }
	dstOff := func(i, k int) int { return ctxBuf/2 + (i%perCtx*perQP+k)*msgSize }
	for h := range 2 {
		for i, q := range qps[h] {
			hb := owner[h][i]
			for k := range perQP {
				binary.LittleEndian.PutUint32(hb.buf.Bytes()[srcOff(i, k):], uint32(i))
				binary.LittleEndian.PutUint32(hb.buf.Bytes()[srcOff(i, k)+4:], uint32(k))
				if err := q.PostRecv([]verbs.RecvWR{{WRID: uint64(k), SGL: []verbs.SGE{hb.mr.SGE(dstOff(i, k), msgSize)}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	deadline := time.Now().Add(120 * time.Second)
	for h := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nextRecv := make([]int, nqp)
			sends, recvs := 0, 0
			var wcs [32]verbs.WC
			for sends < nqp*perQP || recvs < nqp*perQP {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("host %d: timed out at %d sends %d receives", h, sends, recvs)
					return
				}
				var ws []verbs.WC
				for _, c := range ctxs[h] {
					n, err := c.cq.Poll(wcs[:])
					if err != nil {
						errs <- err
						return
					}
					ws = append(ws, wcs[:n]...)
				}
				if len(ws) == 0 {
					time.Sleep(50 * time.Microsecond)
				}
				for _, w := range ws {
					i, ok := idx[h][w.QPNum]
					if w.Status != verbs.WCSuccess || !ok {
						var st string
						if ok {
							q := qps[h][i]
							st = fmt.Sprintf("QP %d: send %v recv %v err %v", i, q.SendState(), q.RecvState(), q.Err())
						}
						errs <- fmt.Errorf("host %d: completion %+v (%v) %s", h, w, w.Status, st)
						return
					}
					if w.Opcode&verbs.WCRecv == 0 {
						sends++
						continue
					}
					k := nextRecv[i]
					buf := owner[h][i].buf.Bytes()[dstOff(i, k):]
					if w.WRID != uint64(k) || binary.LittleEndian.Uint32(buf) != uint32(i) || binary.LittleEndian.Uint32(buf[4:]) != uint32(k) {
						errs <- fmt.Errorf("host %d QP %d: receive %d: wr_id %d carries QP %d message %d",
							h, i, k, w.WRID, binary.LittleEndian.Uint32(buf), binary.LittleEndian.Uint32(buf[4:]))
						return
					}
					nextRecv[i]++
					recvs++
				}
			}
		}()
	}
	post := func(phase int) {
		for h := range 2 {
			for i, q := range qps[h] {
				hb := owner[h][i]
				for k := phase * perPhase; k < (phase+1)*perPhase; k++ {
					if err := q.PostSend([]verbs.SendWR{{WRID: uint64(k), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
						SGL: []verbs.SGE{hb.mr.SGE(srcOff(i, k), msgSize)}}}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	post(0)
	e.linkDown(0)
	time.Sleep(20 * time.Millisecond) // an idle gap: some QPs find out only when they send again
	post(1)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	moved := 0
	for h := range 2 {
		for _, q := range qps[h] {
			if q.SendState() == SendFallback {
				moved++
			}
		}
	}
	t.Logf("%d QPs per side in %d contexts; %d of %d QPs in Fallback", nqp, len(ctxs[0]), moved, 2*nqp)
	if moved != 2*nqp {
		t.Fatalf("%d of %d QPs fell back", moved, 2*nqp)
	}
}
