package mlx5

import "golang.org/x/sys/unix"

// RQ is a receive queue ring: wqeCnt receive WQEs of 1<<wqeShift bytes, each a list of data
// segments (scatter entries). A list shorter than the stride allows ends with a terminator
// segment (lkey MLX5_INVALID_LKEY), as mlx5_post_recv writes it; a full list has none.
type RQ struct {
	buf      []byte
	wqeCnt   uint32
	wqeShift uint
	maxGS    int
	head     uint32
}

// NewRQ wraps buf, which must be wqeCnt<<wqeShift bytes, both powers of two, stride >= 16.
func NewRQ(buf []byte, wqeCnt, wqeShift int) (*RQ, error) {
	if wqeCnt <= 0 || wqeCnt&(wqeCnt-1) != 0 || wqeCnt > 1<<16 || wqeShift < 4 || wqeShift > 16 ||
		len(buf) != wqeCnt<<wqeShift || !aligned(buf, 8) {
		return nil, newErr("new rq", ErrGeometry, unix.EINVAL, "%d WQEs of 1<<%d over %d bytes", wqeCnt, wqeShift, len(buf))
	}
	return &RQ{buf: buf, wqeCnt: uint32(wqeCnt), wqeShift: uint(wqeShift), maxGS: 1 << wqeShift / DataSegSize}, nil
}

// WQECount is the number of receive WQEs.
func (q *RQ) WQECount() int { return int(q.wqeCnt) }

// MaxSGE is the number of scatter entries a WQE holds.
func (q *RQ) MaxSGE() int { return q.maxGS }

// Head is the producer counter (rq.head).
func (q *RQ) Head() uint32 { return q.head }

// SetHead moves the producer counter (QP reset).
func (q *RQ) SetHead(v uint32) { q.head = v }

// HeadWord is the address of the producer counter, for a second poster of the same ring
// outside Go (see SQ.CurPostWord).
func (q *RQ) HeadWord() *uint32 { return &q.head }

func (q *RQ) wqe(idx uint32) []byte {
	o := int(idx&(q.wqeCnt-1)) << q.wqeShift
	return q.buf[o : o+1<<q.wqeShift]
}

// Post writes a receive WQE with the scatter list sges at the head and advances the head;
// zero-length entries are skipped as rdma-core does. It returns the WQE index. Space is the
// caller's business.
func (q *RQ) Post(sges []DataSeg) (uint32, error) {
	if len(sges) > q.maxGS {
		return 0, newErr("post recv", ErrMalformed, unix.EINVAL, "%d SGEs, max %d", len(sges), q.maxGS)
	}
	idx := q.head
	b := q.wqe(idx)
	j := 0
	for i := range sges {
		if sges[i].ByteCount == 0 {
			continue
		}
		sges[i].Put(b[j*DataSegSize:])
		j++
	}
	if j < q.maxGS {
		TerminatorSeg.Put(b[j*DataSegSize:])
	}
	q.head++
	return idx & (q.wqeCnt - 1), nil
}

// Ring publishes the receive WQEs posted so far: barrier, then the receive counter in the
// doorbell record (receives need no UAR doorbell; the NIC reads the record when a message
// arrives).
func (q *RQ) Ring(db DBRec) {
	// udma_to_device_barrier: the NIC must not see the new counter before the scatter lists.
	ToDeviceBarrier()
	db.SetRecvCounter(q.head)
}

// Parse reads the scatter list of receive WQE idx into dst, stopping at a terminator or after
// MaxSGE entries, and returns the count.
func (q *RQ) Parse(idx uint32, dst []DataSeg) (int, error) {
	b := q.wqe(idx)
	n := 0
	for i := 0; i < q.maxGS; i++ {
		d, _ := DecodeDataSeg(b[i*DataSegSize:])
		if d.LKey == InvalidLKey {
			break
		}
		if n == len(dst) {
			return n, newErr("parse recv wqe", ErrShort, unix.EINVAL, "more than %d entries", len(dst))
		}
		dst[n] = d
		n++
	}
	return n, nil
}
