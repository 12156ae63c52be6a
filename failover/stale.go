package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Stale receives and fillers. A receive side that recovers leaves the application RECVs still
// posted on its backup QP there (recoverRecv marks them stale) and reposts them on the default
// QP; at the peer's next fallback onto that backup they sit in front of the receives the
// fallback moves there, and the peer consumes them with zero-length SENDs (fillers) before it
// reposts anything.
//
// Both sides count, per backup set and for the life of its QPs, never what is left: the
// receiver every RECV it marked stale (bkSet.staleMarked, sent in every notification), the
// sender every filler it posted (bkSet.fillers); a fallback posts the difference. The count
// of those left was the stale entries the receiver had not yet seen complete, and a filler's
// completion may come late (a responder acknowledges before it writes the CQE): stale RECVs
// that fillers of an earlier fallback had consumed were counted again, the surplus fillers
// consumed the application's receives, and a message arrived as zero bytes (internal/sim
// seed 3067, with late CQEs). A re-armed set starts both counts at zero with its new QPs.

// maxFillers bounds the fillers one fallback posts: the backup RQ holds at most
// 2×MaxRecvWR+2 receives (makeBackupQP). More means the two counts disagree (a bug).
func (q *QP) maxFillers() uint32 { return 2*q.cap.MaxRecvWR + 2 }

// fillerWindow bounds a QP's signaled sends outstanding on its backup QP while it posts
// fillers. Each filler is signaled, and the backup CQ holds 2×CQE+64 entries (CreateCQ) for
// an application that keeps at most CQE of its own outstanding: perftest's ib_send_lat keeps
// 512 receives posted but sizes its send CQ by its one send in flight, and the 512 fillers of
// its second fallback overran the backup send CQ. The NIC then stops writing completions
// there (IBV_EVENT_CQ_ERR, as a ConnectX does), the watchdog takes the backup NIC for hung,
// and the QP fails (TestPingPongFlap; the plugin's ib_send_lat under a flapping link). Rounds
// run one at a time, so the QPs sharing a CQ have at most this many each in flight when
// their rounds follow each other closely, and the CQ's 64 spare entries hold four of them.
const fillerWindow = 16

// postFillersLocked posts the fillers the peer's count of stale RECVs on the backup set in use
// (its notification's) asks for beyond those we already posted there, at most fillerWindow
// outstanding at a time (withRoomLocked waits for the window as for a full ring).
func (q *QP) postFillersLocked(peerStale uint32) error {
	bs := q.cs()
	n := peerStale - bs.fillers
	if n > q.maxFillers() {
		return fmt.Errorf("failover: QP %#x: the peer counts %d stale receives on backup %d, we posted %d fillers there", q.qpn, peerStale, q.cur.Load(), bs.fillers)
	}
	b := bs.qp.Load()
	one := []verbs.SendWR{{WRID: ctrlWRID, Opcode: verbs.WRSend, Flags: verbs.SendSignaled}}
	for range n {
		q.fifoMu.Lock()
		bs.sendKinds = append(bs.sendKinds, kindCtrl)
		q.fifoMu.Unlock()
		err := q.withRoomLocked(func() error {
			q.fifoMu.Lock()
			out := len(bs.sendKinds) - 1 // this filler's kind is in already
			q.fifoMu.Unlock()
			if out >= fillerWindow {
				return verbs.ErrSQFull // the window, not the ring, is full: wait alike
			}
			q.scq.mu.Lock()
			defer q.scq.mu.Unlock()
			return b.PostSend(one)
		})
		if err != nil {
			q.fifoMu.Lock()
			bs.sendKinds = bs.sendKinds[:len(bs.sendKinds)-1]
			q.fifoMu.Unlock()
			return fmt.Errorf("failover: QP %#x: fillers: %w", q.qpn, err)
		}
		bs.fillers++
		q.c.fillers.Add(1)
	}
	return nil
}
