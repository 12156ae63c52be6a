package provider

import (
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// cqRing is the software side of an mlx5 CQ (struct mlx5_cq in rdma-core): package mlx5's CQ
// ring (ownership, consumer index) plus the QPN → QP table the poller resolves CQEs with.
type cqRing struct {
	ring  *mlx5.CQ
	db    mlx5.DBRec // set_ci, arm
	buf   []byte
	ncqe  uint32 // power of two
	mask  uint32
	armSN atomic.Uint32 // arm sequence number, bumped per completion event (any goroutine)
	peek  cqPeek        // Empty's view of the ring (cq_peek_unsafe.go)

	// qps maps QPNs to the QPs whose completions land here; replaced as a whole on QP
	// create/destroy so the poller reads it without a lock.
	qps     atomic.Pointer[map[uint32]*QP]
	last    *QP             // cache of the last QP seen (rdma-core's cur_rsc)
	lastMap *map[uint32]*QP // the map last was found in; a new map invalidates the cache
	wc      mlx5.FastWC     // what PollWC read from the current CQE
}

func newCQRing(buf []byte, ncqe int, db mlx5.DBRec) (*cqRing, error) {
	r, err := mlx5.NewCQ(buf, ncqe, mlx5.CQE64Size)
	if err != nil {
		return nil, err
	}
	r.Init()
	c := &cqRing{ring: r, db: db, buf: buf, ncqe: uint32(ncqe), mask: uint32(ncqe - 1),
		peek: newCQPeek(buf, db.Word(mlx5.CQSetCI), uint32(ncqe))}
	m := map[uint32]*QP{}
	c.qps.Store(&m)
	return c, nil
}

// ci is the consumer index (cons_index).
func (c *cqRing) ci() uint32 { return c.ring.ConsumerIndex() }

// poll fills wcs from software-owned CQEs (poll_cq / mlx5_parse_cqe for RC QPs without SRQ)
// and returns how many it filled. Package mlx5's PollWC reads only the CQE fields a verbs
// completion needs.
func (c *cqRing) poll(wcs []verbs.WC) (int, error) {
	n := 0
	var err error
	w := &c.wc
	for n < len(wcs) && c.ring.PollWC(w) {
		qpn := w.QPN
		qp := c.last
		if m := c.qps.Load(); qp == nil || qp.qpn != qpn || m != c.lastMap {
			qp = (*m)[qpn]
			if qp == nil {
				err = &cqError{qpn: qpn}
				break
			}
			c.last, c.lastMap = qp, m
		}
		var wrid uint64
		if w.Receive {
			wrid = qp.rq.retire(w.WQECounter)
		} else if w.Status != mlx5.WCSuccess && qp.sq.retain {
			wrid = qp.sq.hold(w.WQECounter)
		} else {
			wrid = qp.sq.retire(w.WQECounter)
		}
		wc := &wcs[n]
		if w.Status == mlx5.WCSuccess {
			*wc = verbs.WC{WRID: wrid, Opcode: verbs.WCOpcode(w.Opcode), ByteLen: w.ByteLen, Imm: w.Imm, QPNum: qpn,
				SrcQP: w.SrcQP, Flags: verbs.WCFlags(w.Flags & (mlx5.WCFlagGRH | mlx5.WCFlagWithImm)), SL: w.SL}
		} else {
			// An error completion carries no opcode in the verbs contract (libmlx5 leaves
			// wc.opcode as it was), yet a CQ shared by a QP's send and receive queues
			// needs one thing from it: which queue the WR came from, since wr_ids are the
			// application's and may repeat across the two queues. Without it a flushed
			// receive read as opcode 0 (IBV_WC_SEND), i.e. as one completion too many of
			// the send queue. So a RESP_ERR CQE (a receive WQE) reports IBV_WC_RECV, as
			// rxe does for flushed receives; a REQ_ERR one keeps 0, a send-side opcode.
			var op verbs.WCOpcode
			if w.Receive {
				op = verbs.WCRecv
			}
			*wc = verbs.WC{WRID: wrid, Status: verbs.WCStatus(w.Status), Opcode: op, VendorErr: uint32(w.VendorErr), QPNum: qpn}
		}
		n++
	}
	if n > 0 || err != nil {
		c.ring.UpdateCI(c.db)
	}
	return n, err
}

type cqError struct{ qpn uint32 }

func (e *cqError) Error() string {
	return "provider: poll_cq: completion for unknown QPN " + utoa(e.qpn)
}

func (e *cqError) Unwrap() error { return verbs.ErrCQOverrun }

func utoa(v uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}
