package failover

import (
	"runtime"
	"time"
)

// spinFor is how long a pacer yields before it sleeps.
const spinFor = time.Millisecond

// pacer paces a loop that polls for completions a NIC owes SHIFT (the flushes of a QP moved
// to ERR, a free slot on a backup SQ): for the first spinFor it only yields the processor, so
// the loop sees a completion microseconds after the NIC wrote it (the emulated NIC's
// goroutines run in the yielded time); after that it sleeps. A sleep from the first
// iteration made every such wait at least the Go runtime's timer granularity, about a
// millisecond on these machines, whatever duration was asked.
//
// In a stepped context (Options.Stepped) the NICs run only when the simulator steps them, so
// a wait hands the thread back to it (Options.Yield) instead.
type pacer struct {
	start time.Time
	c     *Context
}

func (c *Context) pacer() pacer { return pacer{c: c} }

func (p *pacer) wait() {
	if p.c.opts.Stepped {
		if p.c.opts.Yield != nil {
			p.c.opts.Yield()
		}
		return
	}
	if p.start.IsZero() {
		p.start = time.Now()
	}
	if time.Since(p.start) < spinFor {
		runtime.Gosched()
		return
	}
	time.Sleep(50 * time.Microsecond)
}
