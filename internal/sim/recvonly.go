package sim

import "math/rand/v2"

// Receive-only QPs: perftest's bandwidth servers never move their QP to RTS. In a quarter of
// the recovery runs (a stream of the seed's own, so the others run as before) pair 0's QP on
// host 1 is left in RTR and never posts a send; its peer sends to it. The run ends, as every
// recovery run, only once every QP is Default in both directions: the receive-only QP's send
// side comes back with its receive side, and tells its peer, whose receive side comes back
// with it (failover/recvonly.go). The exception is a peer the application stopped (stop.go):
// nothing will bring the receive-only QP back, and it stays on its backup without an error
// (quiet).

// recvOnlyStream names the stream ("RTRONLY").
const recvOnlyStream = 0x5254524f4e4c59

// drawRecvOnly decides whether the run leaves a QP in RTR.
func drawRecvOnly(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, recvOnlyStream)).IntN(4) == 0
}
