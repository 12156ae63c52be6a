package nic

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
)

// Several QP pairs on the same two devices, each driven by its own goroutine (as threads of an
// application would): WRITEs and SENDs of seeded random sizes complete in order with the right
// wqe_counter on every QP, and every byte lands where it was sent. Exercises doorbell demux by
// register, packet demux by QPN and the CQ writers under concurrency.
func TestManyQPsConcurrent(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	e := newEnv(t)
	const pairs, ops = 6, 150
	type pair struct{ a, b *qpEnd }
	ps := make([]pair, pairs)
	for i := range ps {
		a := e.a.newQP(e.a.newCQ(64), e.a.newCQ(64))
		b := e.b.newQP(e.b.newCQ(64), e.b.newCQ(64))
		connect(t, a, b)
		ps[i] = pair{a, b}
	}
	var wg sync.WaitGroup
	errs := make(chan error, pairs)
	for i := range ps {
		wg.Add(1)
		go func(i int, a, b *qpEnd) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			fill(a.mem[:memSize/2], byte(i*31))
			for k := 0; k < ops; k++ {
				n := 1 + rng.IntN(8192)
				off := rng.IntN(memSize/2 - n)
				send := k%5 == 0
				var p mlx5.Posted
				if send {
					if _, err := b.rq.Post([]mlx5.DataSeg{b.seg(memSize/2, 8192)}); err != nil {
						errs <- err
						return
					}
					b.rq.Ring(b.db)
					p = a.post(wqe{op: mlx5.OpcodeSend, local: []mlx5.DataSeg{a.seg(off, n)}, signaled: true})
				} else {
					p = a.post(wqe{op: mlx5.OpcodeRDMAWrite, local: []mlx5.DataSeg{a.seg(off, n)}, raddr: b.va(off), rkey: b.mr.RKey, signaled: true})
				}
				c := a.scq.pollNoFatal()
				if c == nil {
					errs <- fmt.Errorf("pair %d op %d: no CQE", i, k)
					return
				}
				if c.IsError() || c.WQECounter != p.WQEIndex || c.QPN() != a.qp.QPN() {
					errs <- fmt.Errorf("pair %d op %d: CQE %+v, want success for wqe %d on qp %#x", i, k, c.Completion(), p.WQEIndex, a.qp.QPN())
					return
				}
				if send {
					r := b.rcq.pollNoFatal()
					if r == nil || r.IsError() || r.ByteCnt != uint32(n) || !bytes.Equal(b.mem[memSize/2:memSize/2+n], a.mem[off:off+n]) {
						errs <- fmt.Errorf("pair %d op %d: receive %+v of %d bytes wrong", i, k, r, n)
						return
					}
				} else if !bytes.Equal(b.mem[off:off+n], a.mem[off:off+n]) {
					errs <- fmt.Errorf("pair %d op %d: WRITE of %d bytes at %d differs", i, k, n, off)
					return
				}
			}
		}(i, ps[i].a, ps[i].b)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("seed %d: %v", seed, err)
	}
	if s := e.a.dev.Stats(); s.StrayDoorbells != 0 {
		t.Errorf("%d stray doorbells", s.StrayDoorbells)
	}
}
