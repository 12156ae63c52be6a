package demo

import (
	"runtime"
	"time"
)

// idler backs off a polling loop that found nothing to do: a few yields, then short sleeps,
// so four polling goroutines do not starve the emulated NICs on a small machine.
type idler struct{ n int }

func (i *idler) idle() {
	i.n++
	if i.n < 16 {
		runtime.Gosched()
		return
	}
	time.Sleep(50 * time.Microsecond)
}

func (i *idler) busy() { i.n = 0 }
