package provider

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Poll fills wcs with up to len(wcs) completions and returns how many (ibv_poll_cq). An empty
// CQ returns 0, nil. It allocates nothing, takes no lock and makes no system call; calls on
// one CQ must not run concurrently.
func (c *CQ) Poll(wcs []verbs.WC) (int, error) {
	if c.dead.Load() {
		return 0, errPollDestroyed
	}
	if !c.ring.ring.Ready() { // inlined: an empty CQ costs no call
		return 0, nil
	}
	return c.ring.poll(wcs)
}

var errPollDestroyed = fmt.Errorf("provider: poll_cq: %w", verbs.ErrClosed)
