package nic

import (
	"math/rand/v2"
	"testing"

	"github.com/shift-rdma/shift/mlx5"
)

// Whatever software writes into its rings, the device must neither crash nor touch memory
// outside registered regions: random WQEs (with the QP's own QPN and a plausible DS, so they
// reach the segment parser) and random receive WQEs end as error or flush CQEs, or as
// successes where the random bytes happen to form a valid request.
func TestGarbageWQEs(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 0; round < 20; round++ {
		e := newEnv(t)
		a, b := e.pairQPs()
		// Garbage receives on b.
		for i := 0; i < 4; i++ {
			w := b.rq
			if _, err := w.Post([]mlx5.DataSeg{{ByteCount: rng.Uint32(), LKey: rng.Uint32(), Addr: rng.Uint64()}}); err != nil {
				t.Fatal(err)
			}
		}
		b.rq.Ring(b.db)
		// Garbage send WQEs on a.
		buf := a.sq.Buf()
		n := 1 + rng.IntN(8)
		var last mlx5.Posted
		for i := 0; i < n; i++ {
			bb := a.sq.CurPost()
			off := a.sq.Offset(bb)
			for j := 0; j < mlx5.SendWQEBB; j++ {
				buf[off+j] = byte(rng.Uint32())
			}
			ds := 1 + rng.IntN(4)
			ctrl := mlx5.CtrlSeg{Opcode: mlx5.Opcode(rng.IntN(0x14)), WQEIndex: uint16(bb), QPN: a.qp.QPN(), DS: uint8(ds), FMCESE: byte(rng.Uint32())}
			if rng.IntN(2) == 0 {
				// Sometimes a real key with random lengths and addresses around the region.
				for s := 1; s < ds; s++ {
					d := mlx5.DataSeg{ByteCount: uint32(rng.IntN(2 * memSize)), LKey: a.mr.LKey, Addr: a.va(0) + uint64(rng.IntN(2*memSize)) - memSize/2}
					d.Put(buf[off+16*s:])
				}
			}
			ctrl.Put(buf[off:])
			last = mlx5.Posted{Offset: off, WQEIndex: uint16(bb), DS: uint8(ds), BBs: 1}
			a.sq.SetCurPost(bb + 1)
		}
		a.bf.Ring(a.sq, a.db, n, last, false)
		// Then a NOP: once its CQE (or a flush of it) appears, the device has looked at all.
		p := a.build(wqe{op: mlx5.OpcodeNOP, signaled: true})
		a.bf.Ring(a.sq, a.db, 1, p, false)
		for {
			c := a.scq.poll()
			if c.WQECounter == p.WQEIndex {
				break
			}
		}
		e.close()
	}
}
