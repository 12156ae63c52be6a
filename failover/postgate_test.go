package failover

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// The post gate's own cost on the poster's side, beside the compare-and-swap gate it replaced
// (gate.go's CQ gates still use it). Neither touches a ring, so this is the gate alone; the
// gates' cost inside a real post, where a locked instruction also waits for the WQE stores
// ahead of it, is in BenchmarkPostSendFailover.
func BenchmarkPostGate(b *testing.B) {
	initGates()
	b.Run("mark", func(b *testing.B) {
		var g postGate
		for b.Loop() {
			if !g.enter() {
				b.Fatal("closed")
			}
			g.leave()
		}
	})
	b.Run("cas", func(b *testing.B) {
		var g atomic.Uint32
		for b.Loop() {
			if !g.CompareAndSwap(gateOpen, gateBusy) {
				b.Fatal("closed")
			}
			g.Store(gateOpen)
		}
	})
}

// A closed gate turns its poster away, and closing waits for a poster inside to leave.
func TestPostGateCloseWaitsForPoster(t *testing.T) {
	initGates()
	var g postGate
	if !g.enter() {
		t.Fatal("a fresh gate is closed")
	}
	closed := make(chan struct{})
	go func() {
		closePostGates(&g)
		close(closed)
	}()
	// The closer stores gateClosed before it waits: once it is visible, the closer is
	// waiting for this poster.
	for g.state.Load() != gateClosed {
		runtime.Gosched()
	}
	// A closer that did not wait would return within these yields; a correct one never does.
	for range 1000 {
		runtime.Gosched()
	}
	select {
	case <-closed:
		t.Fatal("closePostGates returned with the poster inside")
	default:
	}
	g.leave()
	<-closed
	if g.enter() {
		t.Fatal("entered a closed gate")
	}
	if !g.reopen() || !g.enter() {
		t.Fatal("a reopened gate turned the poster away")
	}
	g.leave()
}
