package nic

import (
	"encoding/binary"
	"errors"

	"github.com/shift-rdma/shift/mlx5"
)

// The device's own writing of completions and reading of doorbell records, from the PRM
// layouts (struct mlx5_cqe64 and mlx5_err_cqe of mlx5dv.h, big-endian; the doorbell record
// words), sharing no ring code with package mlx5 (see prm_wqe.go).

// Offsets in a 64-byte CQE.
const (
	cqeSize         = 64
	cqeFlagsRQPN    = 24 // __be32 flags_rqpn
	cqeSRQNUIdx     = 32 // __be32 srqn_uidx (srqn in mlx5_err_cqe)
	cqeImmInvalPKey = 36 // __be32 imm_inval_pkey
	cqeByteCnt      = 44 // __be32 byte_cnt
	cqeVendorSynd   = 54 // mlx5_err_cqe vendor_err_synd
	cqeSyndrome     = 55 // mlx5_err_cqe syndrome
	cqeSopDropQPN   = 56 // __be32 sop_drop_qpn (s_wqe_opcode_qpn in mlx5_err_cqe)
	cqeWQECounter   = 60 // __be16 wqe_counter; then signature, op_own
	cqeOwner        = 1  // MLX5_CQE_OWNER_MASK
	cqeSE           = 2  // the solicited-event bit of op_own
)

// cqe is a completion the device writes.
type cqe struct {
	opcode         uint8 // the CQE opcode (op_own >> 4): mlx5.CQEReq, ...
	solicited      bool
	flagsRQPN      uint32
	srqnUIdx       uint32
	immInvalPKey   uint32
	byteCnt        uint32
	syndrome       uint8
	vendorSyndrome uint8
	sopDropQPN     uint32
	wqeCounter     uint16
}

func (e *cqe) isError() bool { return e.opcode == mlx5.CQEReqErr || e.opcode == mlx5.CQERespErr }

// body writes the first 60 bytes of e into b (reserved bytes zero).
func (e *cqe) body(b []byte) {
	clear(b[:cqeWQECounter])
	binary.BigEndian.PutUint32(b[cqeFlagsRQPN:], e.flagsRQPN)
	binary.BigEndian.PutUint32(b[cqeSRQNUIdx:], e.srqnUIdx)
	binary.BigEndian.PutUint32(b[cqeImmInvalPKey:], e.immInvalPKey)
	binary.BigEndian.PutUint32(b[cqeByteCnt:], e.byteCnt)
	if e.isError() {
		b[cqeVendorSynd], b[cqeSyndrome] = e.vendorSyndrome, e.syndrome
	}
	binary.BigEndian.PutUint32(b[cqeSopDropQPN:], e.sopDropQPN)
}

// tail is the last word: wqe_counter, signature 0, op_own with the owner bit for the pass.
func (e *cqe) tail(owner uint8) [4]byte {
	var w [4]byte
	binary.BigEndian.PutUint16(w[0:], e.wqeCounter)
	w[3] = e.opcode<<4 | owner&cqeOwner
	if e.solicited {
		w[3] |= cqeSE
	}
	return w
}

// cqRing is a CQ buffer of n entries (a power of two) of stride bytes: 64, or 128 when
// software asked for 128-byte CQEs, whose 64-byte CQE is the entry's second half (the first
// holds data scattered to the CQE, which this device never does), as libmlx5's get_cqe
// reads it (cqe + 64).
type cqRing struct {
	buf    []byte
	n      uint32
	stride int
}

func newCQRing(buf []byte, n, stride int) (*cqRing, error) {
	if n <= 0 || n&(n-1) != 0 || (stride != cqeSize && stride != 2*cqeSize) || len(buf) != n*stride {
		return nil, errors.New("CQ ring geometry")
	}
	return &cqRing{buf: buf, n: uint32(n), stride: stride}, nil
}

// hasRoom reports whether the device may write entry pi, given the consumer index software
// last published (24 bits): an entry still unpolled may not be overwritten.
func (r *cqRing) hasRoom(pi, ci uint32) bool { return (pi-ci)&cqCIMask < r.n }

// publish writes e as entry pi: the body first, then the last word in one atomic store with
// the owner bit of pi's pass, so software that sees the new owner bit sees the whole entry.
func (r *cqRing) publish(pi uint32, e *cqe) {
	b := r.buf[int(pi&(r.n-1))*r.stride+r.stride-cqeSize:][:cqeSize]
	e.body(b)
	owner := uint8(0)
	if pi&r.n != 0 {
		owner = 1
	}
	storeWord(b, cqeWQECounter, e.tail(owner))
}

// Doorbell record words (big-endian u32s): a QP's receive and send counters, a CQ's consumer
// index and arm word.
const (
	dbRecv    = 0 // MLX5_RCV_DBR
	dbSend    = 1 // MLX5_SND_DBR
	dbCQSetCI = 0 // MLX5_CQ_SET_CI
	dbCQArm   = 1 // MLX5_CQ_ARM_DB
	cqCIMask  = 0xffffff
)

// dbRecord is an 8-byte doorbell record in host memory.
type dbRecord struct{ b []byte }

func newDBRecord(b []byte) (dbRecord, error) {
	if len(b) != 8 || addrOf(b)%4 != 0 {
		return dbRecord{}, errors.New("doorbell record geometry")
	}
	return dbRecord{b: b}, nil
}

func (d dbRecord) load(i int) uint32     { return loadBE32(d.b, 4*i) }
func (d dbRecord) store(i int, v uint32) { storeBE32(d.b, 4*i, v) }

// recvCounter and sendCounter are the QP's producer counters (16 bits).
func (d dbRecord) recvCounter() uint16 { return uint16(d.load(dbRecv)) }
func (d dbRecord) sendCounter() uint16 { return uint16(d.load(dbSend)) }

// consumerIndex is the CQ's consumer index (24 bits).
func (d dbRecord) consumerIndex() uint32 { return d.load(dbCQSetCI) & cqCIMask }

// UAR doorbells, as the 8 bytes software wrote in memory order.

// parseCQDoorbell reads a CQ doorbell (MLX5_CQ_DOORBELL): the arm word (sn<<28 | cmd | ci)
// then the CQN, both big-endian.
func parseCQDoorbell(v [8]byte) (cqn, armWord uint32) {
	return binary.BigEndian.Uint32(v[4:]) & 0xffffff, binary.BigEndian.Uint32(v[0:])
}

// parseSQDoorbellQPN reads the QPN of a send doorbell: the first 8 bytes of a WQE's control
// segment (opmod_idx_opcode, qpn_ds).
func parseSQDoorbellQPN(v [8]byte) uint32 { return binary.BigEndian.Uint32(v[4:]) >> 8 }
