package fence_test

import (
	"testing"
	"time"

	"github.com/shift-rdma/shift/fence"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

const benchBatch = 128 // WRs posted per fence (the SQ holds 256)

// spinWC polls cq until one completion arrives and returns it (failure guard: 30 s).
func spinWC(tb testing.TB, cq *provider.CQ) verbs.WC {
	var wc [1]verbs.WC
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			tb.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		if time.Now().After(deadline) {
			tb.Fatal("timed out waiting for a completion")
		}
	}
}

// beginFence posts a signaled fence WR on the backup path and begins f over it.
func beginFence(tb testing.TB, b *bed, f *fence.Fence, notify bool) {
	fw, err := fence.PostSignaled(b.snd[pathBackup].qp, b.write(pathBackup, 0xf, 0, 8, 0))
	if err != nil {
		tb.Fatal(err)
	}
	var n *verbs.SendWR
	if notify {
		// Consume the receiver's completions of earlier notifications, freeing their receives.
		var wc [16]verbs.WC
		for len(poll(tb, b.rcv[pathDefault].cq, wc[:])) > 0 {
		}
		b.postRecvs(tb, pathDefault, 1)
		w := b.writeImm(pathDefault, 0x4e, bufSize-128, 1)
		n = &w
	}
	if err := f.Begin(fw, n); err != nil {
		tb.Fatal(err)
	}
}

// finishFence hands the fence WC (and the notification's) to f, waits for the last withheld
// WR's completion and resets f.
func finishFence(tb testing.TB, b *bed, f *fence.Fence) {
	for f.State() != fence.Done {
		cq := b.snd[pathBackup].cq
		if f.State() == fence.Notifying {
			cq = b.snd[pathDefault].cq
		}
		wc := spinWC(tb, cq)
		if ours, err := f.HandleWC(&wc); !ours || err != nil {
			tb.Fatalf("completion %+v: ours %v, err %v", wc, ours, err)
		}
	}
	if wc := spinWC(tb, b.snd[pathDefault].cq); wc.Status != verbs.WCSuccess {
		tb.Fatalf("last withheld WR: %+v", wc)
	}
	if err := f.Reset(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkPost compares one WR posted through a pending fence (doorbell withheld) with one
// posted by provider.QP.PostSend (doorbell rung), on the same QP; draining the queue every
// benchBatch posts is not timed.
func BenchmarkPost(bm *testing.B) {
	bm.Run("withheld", func(bm *testing.B) {
		b := newBed(bm)
		f := newFence(bm, b)
		wr := []verbs.SendWR{b.write(pathDefault, 1, 4096, 64, 0)}
		last := []verbs.SendWR{b.write(pathDefault, 2, 4096, 64, verbs.SendSignaled)}
		bm.ReportAllocs()
		beginFence(bm, b, f, false)
		k := 0
		for bm.Loop() {
			k++
			w := wr
			if k == benchBatch {
				w = last
			}
			if err := f.Post(w); err != nil {
				bm.Fatal(err)
			}
			if k == benchBatch {
				bm.StopTimer()
				finishFence(bm, b, f)
				beginFence(bm, b, f, false)
				k = 0
				bm.StartTimer()
			}
		}
	})
	bm.Run("PostSend", func(bm *testing.B) {
		b := newBed(bm)
		qp, cq := b.snd[pathDefault].qp, b.snd[pathDefault].cq
		wr := []verbs.SendWR{b.write(pathDefault, 1, 4096, 64, 0)}
		last := []verbs.SendWR{b.write(pathDefault, 2, 4096, 64, verbs.SendSignaled)}
		bm.ReportAllocs()
		k := 0
		for bm.Loop() {
			k++
			w := wr
			if k == benchBatch {
				w = last
			}
			if err := qp.PostSend(w); err != nil {
				bm.Fatal(err)
			}
			if k == benchBatch {
				bm.StopTimer()
				spinWC(bm, cq)
				k = 0
				bm.StartTimer()
			}
		}
	})
}

// BenchmarkRelease measures the release latency on the emulator: from the fence WR's
// completion handed in to the completion of the last of 16 withheld WRITEs, without and with
// the notification in between (which adds its own round trip).
func BenchmarkRelease(bm *testing.B) {
	for _, notify := range []bool{false, true} {
		name := "direct"
		if notify {
			name = "notification"
		}
		bm.Run(name, func(bm *testing.B) {
			b := newBed(bm)
			f := newFence(bm, b)
			old, nw := b.snd[pathBackup], b.snd[pathDefault]
			wrs := make([]verbs.SendWR, 16)
			for i := range wrs {
				wrs[i] = b.write(pathDefault, uint64(10+i), 4096+i*1024, 1024, 0)
			}
			wrs[len(wrs)-1].Flags = verbs.SendSignaled
			for bm.Loop() {
				bm.StopTimer()
				beginFence(bm, b, f, notify)
				if err := f.Post(wrs); err != nil {
					bm.Fatal(err)
				}
				fwc := spinWC(bm, old.cq)
				bm.StartTimer()
				if ours, err := f.HandleWC(&fwc); !ours || err != nil {
					bm.Fatalf("fence WC: %v %v", ours, err)
				}
				for f.State() == fence.Notifying {
					wc := spinWC(bm, nw.cq)
					if ours, err := f.HandleWC(&wc); !ours || err != nil {
						bm.Fatalf("notification WC: %v %v", ours, err)
					}
				}
				if wc := spinWC(bm, nw.cq); wc.WRID != 25 || wc.Status != verbs.WCSuccess {
					bm.Fatalf("last withheld WR: %+v", wc)
				}
				bm.StopTimer()
				if err := f.Reset(); err != nil {
					bm.Fatal(err)
				}
				bm.StartTimer()
			}
		})
	}
}

// BenchmarkPostIdleBaseline is the reference for BenchmarkRelease: the same 16 WRITEs posted
// with PostSend on a QP whose NIC has been idle for as long as the release's setup takes, to
// the last completion. The emulated NIC's doorbell watcher sleeps when idle, so both include
// its wake-up.
func BenchmarkPostIdleBaseline(bm *testing.B) {
	b := newBed(bm)
	old, nw := b.snd[pathBackup], b.snd[pathDefault]
	wrs := make([]verbs.SendWR, 16)
	for i := range wrs {
		wrs[i] = b.write(pathDefault, uint64(10+i), 4096+i*1024, 1024, 0)
	}
	wrs[len(wrs)-1].Flags = verbs.SendSignaled
	for bm.Loop() {
		bm.StopTimer()
		// The same idle-making setup as BenchmarkRelease: one signaled WR on the other path.
		if err := old.qp.PostSend([]verbs.SendWR{b.write(pathBackup, 0xf, 0, 8, verbs.SendSignaled)}); err != nil {
			bm.Fatal(err)
		}
		spinWC(bm, old.cq)
		bm.StartTimer()
		if err := nw.qp.PostSend(wrs); err != nil {
			bm.Fatal(err)
		}
		if wc := spinWC(bm, nw.cq); wc.WRID != 25 || wc.Status != verbs.WCSuccess {
			bm.Fatalf("last WR: %+v", wc)
		}
	}
}

// TestWithheldPostAllocatesNothing asserts the per-WR paths (a withheld post, a completion
// handed in that is not the fence's) are allocation-free.
func TestWithheldPostAllocatesNothing(t *testing.T) {
	b := newBed(t)
	f := newFence(t, b)
	beginFence(t, b, f, true)
	wr := []verbs.SendWR{b.write(pathDefault, 1, 4096, 64, 0)}
	if a := testing.AllocsPerRun(100, func() {
		if err := f.Post(wr); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("withheld post allocates %.1f times per WR", a)
	}
	// Handing in completions that are not the fence's is on every poll: no allocation either.
	other := verbs.WC{WRID: 0x1234, QPNum: b.snd[pathBackup].qp.QPN()}
	if a := testing.AllocsPerRun(100, func() {
		if ours, err := f.HandleWC(&other); ours || err != nil {
			t.Fatalf("foreign completion: ours %v, err %v", ours, err)
		}
	}); a != 0 {
		t.Fatalf("HandleWC allocates %.1f times per foreign completion", a)
	}
	if st := f.Stats(); st.WithheldWRs != 101 {
		t.Fatalf("stats %+v", st)
	}
}
