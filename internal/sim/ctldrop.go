package sim

import "math/rand/v2"

// Lost control messages (failover/notifyresend.go): a peer drops a round's notification or
// reply that arrives for a QP whose backup set is not, or not yet, connected to the sender's.
// In a quarter of the failover runs (seedConfig draws Config.CtlDrop) one such message is
// dropped on arrival: the CtlDrop-th delivered in the run, counting both hosts. The run must
// then end as any other, every invariant holding: the notification is sent again (once
// halfway through a handshake's HandshakeTimeout, every HandshakeTimeout in a reset round),
// or the peer's own round makes up for it. Refusals and a receive-only QP's "never sent"
// message are not dropped: nothing sends them again.

// ctlDropStream names the stream ("CTLDROP").
const ctlDropStream = 0x43544c44524f50

// drawCtlDrop is the message a failover run of seed drops (1-based), or 0 for none.
func drawCtlDrop(seed uint64) int {
	r := rand.New(rand.NewPCG(seed, ctlDropStream))
	if r.IntN(4) != 0 {
		return 0
	}
	return 1 + r.IntN(8)
}

// ctlDropper counts the round messages delivered and drops the n-th (the simulation is one
// thread: both contexts deliver from its steps).
type ctlDropper struct {
	n, seen, dropped int
}

func (d *ctlDropper) drop() bool {
	d.seen++
	if d.seen != d.n {
		return false
	}
	d.dropped++
	return true
}
