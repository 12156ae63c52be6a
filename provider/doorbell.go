package provider

import (
	"encoding/binary"

	"github.com/shift-rdma/shift/mlx5"
)

// bfReg is one BlueFlame register (struct mlx5_bf): two halves of bufSize bytes in a UAR page
// that alternate between doorbells, so consecutive BlueFlame copies land in different
// write-combining buffers.
type bfReg struct {
	reg     []byte // the 2*bufSize bytes of the register inside the mapped UAR page
	offset  int    // 0 or bufSize
	bufSize int
	// blueFlame is false for bfreg 0 (uuarn 0 has no BlueFlame, only the 8-byte doorbell).
	blueFlame bool
}

// ringSQ is post_send_db: publish the WQEs through the doorbell record, then tell the NIC
// through the UAR, either by copying a single small WQE into the BlueFlame register or with
// the 8-byte doorbell holding the first 8 bytes of the last control segment.
func (q *QP) ringSQ(nreq int, inl bool, ds int, ctrlOff int) {
	sq := q.sq
	// The doorbell record must not be seen before the WQEs it publishes: storeBE32 is an
	// atomic (sequentially consistent) store, ordering every WQE byte written before it,
	// as udma_to_device_barrier does in rdma-core.
	storeBE32(q.dbrec, mlx5.SndDBR*4, sq.cur&0xffff)
	sq.rung = sq.cur
	bf := &q.bf
	reg := bf.reg[bf.offset:]
	if nreq == 1 && bf.blueFlame && inl && ds > 1 && ds <= bf.bufSize/16 {
		// BlueFlame: the whole WQE goes to the device with the doorbell, saving the NIC a
		// DMA read of the ring. It is copied 64 bytes at a time (mlx5_bf_copy), following
		// the ring across its end; the first 8 bytes go last and atomically, so a device
		// that polls the register never sees a partly written block.
		n := alignUp(ds*16, 64)
		src := ctrlOff
		for done := 0; done < n; done += 64 {
			copy(reg[done+8:done+64], sq.buf[src+8:src+64])
			if done > 0 {
				copy(reg[done:done+8], sq.buf[src:src+8])
			}
			src = (src + 64) & (len(sq.buf) - 1)
		}
		storeU64(reg, 0, binary.NativeEndian.Uint64(sq.buf[ctrlOff:ctrlOff+8]))
	} else {
		// The 8-byte doorbell: opmod_idx_opcode and qpn_ds of the last WQE, written as one
		// 64-bit store (mmio_write64_be of the big-endian bytes).
		storeU64(reg, 0, binary.NativeEndian.Uint64(sq.buf[ctrlOff:ctrlOff+8]))
	}
	// Alternate halves, as rdma-core does after flushing the write-combining buffer.
	bf.offset ^= bf.bufSize
}

// armCQ is mlx5_arm_cq: record the arm request in the doorbell record, then write the CQ
// doorbell (sn<<28 | cmd | ci in the high word, cqn in the low word, big-endian) to the UAR.
func (c *CQ) armCQ(solicited bool) {
	r := &c.ring
	sn := r.armSN & mlx5.CQDBSeqMask
	ci := r.ci & mlx5.CQDBCIMask
	cmd := uint32(mlx5.CQDBReqNot)
	if solicited {
		cmd = mlx5.CQDBReqNotSol
	}
	word := sn<<mlx5.CQDBSeqShift | cmd | ci
	storeBE32(r.dbrec, mlx5.CQArmDB*4, word)
	// The doorbell record is in place (atomic store above) before the UAR write.
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(word)<<32|uint64(c.cqn))
	storeU64(c.uar, mlx5.CQDoorbell, binary.NativeEndian.Uint64(b[:]))
}
