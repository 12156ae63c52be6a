//go:build !race

package asymfence

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

// The store-buffering litmus test: the fast side stores its flag with a plain store and
// loads the slow side's; the slow side stores its flag, calls Fence, and loads the fast
// side's. Both loads reading zero is what x86 allows without barriers (each store still in
// its CPU's store buffer) and what Fence must rule out. (Plain stores on purpose: hence
// !race.)
func TestStoreBuffering(t *testing.T) {
	if err := Register(); errors.Is(err, ErrNotSupported) {
		t.Skipf("not supported here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to run the two sides at once")
	}
	const rounds = 20000
	var (
		turn       atomic.Uint32 // round the fast side may start: 2*i+1 once both reset
		fastFlag   [rounds]uint32
		slowFlag   [rounds]atomic.Uint32
		fastSaw    [rounds]uint32
		slowSaw    [rounds]uint32
		fastDone   atomic.Uint32
		fastResult = make(chan struct{})
	)
	go func() {
		defer close(fastResult)
		for i := range rounds {
			for turn.Load() != uint32(i+1) {
			}
			fastFlag[i] = 1 // plain: the fast path's mark
			fastSaw[i] = slowFlag[i].Load()
			fastDone.Store(uint32(i + 1))
		}
	}()
	for i := range rounds {
		turn.Store(uint32(i + 1))
		slowFlag[i].Store(1)
		Fence()
		slowSaw[i] = atomic.LoadUint32(&fastFlag[i])
		for fastDone.Load() != uint32(i+1) {
		}
	}
	<-fastResult
	both := 0
	for i := range rounds {
		if fastSaw[i] == 0 && slowSaw[i] == 0 {
			both++
		}
	}
	if both != 0 {
		t.Fatalf("%d of %d rounds: both sides read zero across Fence", both, rounds)
	}
}

// Register answers every call with the first result, and once it succeeded Fence works
// (it panics when the kernel refuses the command, i.e. when registration did not happen).
func TestRegisterOnce(t *testing.T) {
	err := Register()
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("not supported here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if again := Register(); again != nil {
		t.Fatalf("second Register: %v after success", again)
	}
	Fence()
}

// BenchmarkFence is the slow side's price: one membarrier(2) call.
func BenchmarkFence(b *testing.B) {
	if err := Register(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		Fence()
	}
}
