package sim

import (
	"math/rand/v2"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/probe"
)

// Link events (issue 12 §4's link watcher, issue 14's seams). In half of the failover runs
// each host's context gets its default NIC's link events (failover.Options.LinkEvents), as a
// probe.Watcher would give them: the fabric calls its watchers inside SetLinkUp, that is
// inside the simulator's own step, so each event is on the channel before the context's next
// Step reads it, the same on every run. A down event then starts the fallback of every QP at
// once, and the default device's PORT_ERR does too, before any error completion: detection
// at any instant of a round, a drain or a post, as with the watcher on hardware. The other
// half detects failures by completions and async events alone.

// linkWatchStream is the PCG stream, beside the seed, that draws whether a run has link
// events: a stream of its own, so that the other draws of a seed do not change.
const linkWatchStream = 0x4c494e4b

// drawLinkWatch reports whether the run of seed feeds its contexts link events.
func drawLinkWatch(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, linkWatchStream)).IntN(2) == 0
}

// linkEvents returns a channel of endpoint ep's link events and the function that stops
// them. Like a watcher's, the channel is buffered and a flood drops the oldest news: the
// context gets the later events.
func linkEvents(ep *fabric.Endpoint, netdev string) (<-chan probe.LinkEvent, func()) {
	ch := make(chan probe.LinkEvent, 256)
	cancel := ep.Watch(func(ev fabric.LinkEvent) {
		select {
		case ch <- probe.LinkEvent{Netdev: netdev, Up: ev.Up}:
		default:
		}
	})
	return ch, cancel
}
