package mlx5

import (
	"math/bits"
	"sync/atomic"
)

// DBRec is a doorbell record: two big-endian 32-bit words in host memory that the NIC reads
// by DMA (rdma-core providers/mlx5/dbrec.c allocates them; the QP or CQ create command passes
// their address). For a QP word RcvDBR holds the receive counter and SndDBR the send counter;
// for a CQ word CQSetCI holds the consumer index and CQArmDB the last arm request.
//
// Both words are stored and loaded atomically: the device model reads them from another
// goroutine, and a real NIC reads them by DMA at any time.
type DBRec struct {
	w [2]*uint32
}

// NewDBRec returns the doorbell record at b[0:8]; b must be 4-byte aligned.
func NewDBRec(b []byte) (DBRec, error) {
	var d DBRec
	for i := range d.w {
		p, err := word32("doorbell record", b, 4*i)
		if err != nil {
			return DBRec{}, err
		}
		d.w[i] = p
	}
	return d, nil
}

var nativeLittle = ne.Uint16([]byte{1, 0}) == 1

// be32 converts v so that storing it natively leaves its big-endian bytes in memory.
func be32(v uint32) uint32 {
	if nativeLittle {
		return bits.ReverseBytes32(v)
	}
	return v
}

// Store writes word i (0 or 1) as the big-endian value v.
func (d DBRec) Store(i int, v uint32) { atomic.StoreUint32(d.w[i], be32(v)) }

// Load reads word i as a big-endian value.
func (d DBRec) Load(i int) uint32 { return be32(atomic.LoadUint32(d.w[i])) }

// Word is word i of the record (big-endian in memory), for readers that load it themselves
// (an inlined emptiness check of a CQ).
func (d DBRec) Word(i int) *uint32 { return d.w[i] }

// Valid reports whether d was constructed over memory.
func (d DBRec) Valid() bool { return d.w[0] != nil }

// SetSendCounter records the SQ producer counter (sq.cur_post & 0xffff).
func (d DBRec) SetSendCounter(curPost uint32) { d.Store(SndDBR, curPost&wqeCounterMask) }

// SendCounter is the SQ producer counter a device reads.
func (d DBRec) SendCounter() uint16 { return uint16(d.Load(SndDBR)) }

// SetRecvCounter records the RQ producer counter (rq.head & 0xffff).
func (d DBRec) SetRecvCounter(head uint32) { d.Store(RcvDBR, head&wqeCounterMask) }

// RecvCounter is the RQ producer counter a device reads.
func (d DBRec) RecvCounter() uint16 { return uint16(d.Load(RcvDBR)) }

// SetConsumerIndex records a CQ's consumer index (update_cons_index: ci & 0xffffff).
func (d DBRec) SetConsumerIndex(ci uint32) { d.Store(CQSetCI, ci&CQDBCIMask) }

// ConsumerIndex is the CQ consumer index a device reads.
func (d DBRec) ConsumerIndex() uint32 { return d.Load(CQSetCI) & CQDBCIMask }

// ArmWord composes the CQ arm word of mlx5_arm_cq: sn<<28 | cmd | ci.
func ArmWord(sn uint32, solicited bool, ci uint32) uint32 {
	cmd := uint32(CQDBReqNot)
	if solicited {
		cmd = CQDBReqNotSol
	}
	return (sn&CQDBSeqMask)<<CQDBSeqShift | cmd | ci&CQDBCIMask
}

// ParseArmWord splits an arm word.
func ParseArmWord(w uint32) (sn uint32, solicited bool, ci uint32) {
	return w >> CQDBSeqShift & CQDBSeqMask, w&CQDBCmdMask == CQDBReqNotSol, w & CQDBCIMask
}

// Arm reads the CQ arm word as a device would.
func (d DBRec) Arm() (sn uint32, solicited bool, ci uint32) { return ParseArmWord(d.Load(CQArmDB)) }
