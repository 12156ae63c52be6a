package sim

import "math/rand/v2"

// Deep receive queues and a send CQ of its own, as perftest's latency tools have them:
// ib_send_lat posts 512 receives up front and sizes its send CQ for its one send in flight.
// SHIFT's own completions then compete for little room: a recovery leaves every receive
// posted on the backup QP there, and the next fallback consumes them with signaled filler
// SENDs on the backup, whose send CQ SHIFT sizes from the application's (failover.CreateCQ:
// twice it plus 64). Posted at once, ib_send_lat's 512 fillers overran it, the NIC stopped
// writing there and the watchdog took the backup NIC for hung (failover.fillerWindow). The
// simulation's other runs keep 16 receives a QP and one CQ for both queues, sized for all.
//
// In a quarter of the failover runs (a stream of the seed's own, so that the others run as
// before) every QP has deepRQ receives, posted in full before the traffic starts and kept
// so by the replenishing steps, into receive slots of their own after the pairs' blocks; the
// application keeps deepSends sends outstanding a QP, every one signaled; each host's
// receive CQ holds exactly its QPs' receives and its send CQ exactly their sends, and a poll
// step polls the receive CQ and, only while one of the host's sends waits for its
// completion, the send CQ (sendWaited).
//
// With failover.fillerWindow lifted, seed 1815 (recovery, two backups) ends with work left
// after 500,000 steps among the first 2,000 seeds. A first version of these runs (128
// receives, up to 16 sends, both CQs polled every time) found seed 265: a reset round whose
// INIT failed on a default NIC that had just died left the default QP in RESET, and the next
// fallback failed the QP moving it to ERR (failover.QP.stopDefaultLocked).

// deepStream names the stream ("DEEPRQ").
const deepStream = 0x444545505251

// deepRQ is the receive depth of a deep run's QPs, and deepSends the sends the application
// keeps outstanding on each (its send CQ holds that many a QP; the QP is still made for
// sqDepth, as perftest makes its QPs for more than its latency tools have in flight).
const (
	deepRQ    = 256
	deepSends = 1
)

// drawDeep decides whether a failover run's QPs have deep receive queues.
func drawDeep(seed uint64, failover bool) bool {
	return failover && rand.New(rand.NewPCG(seed, deepStream)).IntN(4) == 0
}
