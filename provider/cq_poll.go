package provider

import (
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"
)

// cqRing is the software side of an mlx5 CQ: ncqe 64-byte CQEs, the consumer index and the
// doorbell record (set_ci, arm) — struct mlx5_cq in rdma-core.
type cqRing struct {
	buf   []byte
	ncqe  uint32 // power of two
	mask  uint32
	ci    uint32 // cons_index (free running)
	dbrec []byte // 8 bytes: set_ci word, arm word
	armSN uint32 // arm sequence number, bumped per completion event

	// qps maps QPNs to the QPs whose completions land here; replaced as a whole on QP
	// create/destroy so the poller reads it without a lock.
	qps     atomic.Pointer[map[uint32]*QP]
	last    *QP             // cache of the last QP seen (rdma-core's cur_rsc)
	lastMap *map[uint32]*QP // the map last was found in; a new map invalidates the cache
}

// initCQBuf marks every CQE invalid and owned by hardware for the first pass, as
// mlx5_alloc_cq_buf does (op_own = MLX5_CQE_INVALID << 4).
func initCQBuf(buf []byte) {
	for off := 0; off+mlx5.CQE64Size <= len(buf); off += mlx5.CQE64Size {
		buf[off+mlx5.CQE64Size-1] = mlx5.CQEInvalid << 4
	}
}

// next returns the CQE at the consumer index if software owns it (get_sw_cqe): a valid
// opcode and an owner bit equal to the parity of the pass.
func (c *cqRing) next() ([]byte, bool) {
	off := int(c.ci&c.mask) * mlx5.CQE64Size
	cqe := c.buf[off : off+mlx5.CQE64Size : off+mlx5.CQE64Size]
	w := loadBE32(cqe, 60) // wqe_counter | signature | op_own
	opOwn := uint8(w)
	if opOwn>>4 == mlx5.CQEInvalid {
		return nil, false
	}
	pass := uint8(0)
	if c.ci&c.ncqe != 0 {
		pass = 1
	}
	if opOwn&mlx5.CQEOwnerMask != pass {
		return nil, false
	}
	return cqe, true
}

func (c *cqRing) updateCI() {
	storeBE32(c.dbrec, mlx5.CQSetCI*4, c.ci&mlx5.CQDBCIMask)
}

// poll fills wcs from software-owned CQEs (poll_cq / mlx5_parse_cqe for RC QPs without SRQ)
// and returns how many it filled.
func (c *cqRing) poll(wcs []WC) (int, error) {
	n := 0
	var err error
	for n < len(wcs) {
		raw, ok := c.next()
		if !ok {
			break
		}
		cqe, _ := mlx5.DecodeCQE64(raw)
		c.ci++
		qpn := cqe.QPN()
		qp := c.last
		if m := c.qps.Load(); qp == nil || qp.qpn != qpn || m != c.lastMap {
			if m != nil {
				qp = (*m)[qpn]
			} else {
				qp = nil
			}
			if qp == nil {
				err = &cqError{qpn: qpn}
				break
			}
			c.last, c.lastMap = qp, m
		}
		w := cqe.Completion()
		wc := &wcs[n]
		*wc = WC{
			Status:    WCStatus(w.Status),
			QPNum:     qpn,
			VendorErr: uint32(w.VendorErr),
		}
		if w.Receive {
			wc.WRID = qp.rq.retire(w.WQECounter)
		} else {
			wc.WRID = qp.sq.retire(w.WQECounter)
		}
		if w.Status == mlx5.WCSuccess {
			wc.Opcode = WCOpcode(w.Opcode)
			wc.ByteLen = w.ByteLen
			wc.Imm = w.Imm
			wc.SrcQP = w.SrcQP
			wc.SL = w.SL
			wc.Flags = WCFlags(w.Flags & (mlx5.WCFlagGRH | mlx5.WCFlagWithImm))
		}
		n++
	}
	if n > 0 || err != nil {
		c.updateCI()
	}
	return n, err
}

type cqError struct{ qpn uint32 }

func (e *cqError) Error() string {
	return "provider: poll_cq: completion for unknown QPN " + utoa(e.qpn)
}

func (e *cqError) Unwrap() error { return ErrCQOverrun }

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
