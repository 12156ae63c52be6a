package mlx5

// RingFast is RingAt — rdma-core's post_send_db, with the same barriers in the same places —
// with the UAR written by plain 8-byte stores instead of sync/atomic ones, as rdma-core's
// mmio_write64_be and mlx5_bf_copy write it. It leaves the same bytes in the doorbell record
// and the UAR as RingAt (doorbell_fast_test.go compares them).
//
// Why the stores may be plain: on amd64 sync/atomic's 64-bit store is XCHG, a locked
// read-modify-write, which costs a full fence per 8 bytes (16 of them for a 2-WQEBB BlueFlame
// copy) and, on a real UAR mapping, asks the CPU for a locked access to write-combining device
// memory, which rdma-core never does. An aligned 8-byte MOV (amd64) or STR (arm64) is
// single-copy atomic, so the NIC still sees each word whole. Ordering does not rest on the
// stores being atomic: the doorbell-record store before them stays a sync/atomic store (the
// release the device model's atomic load of the record synchronises with, before it reads the
// WQEs), WCStart/FlushWrites are assembly calls the compiler cannot move plain stores across,
// and the fences themselves are unchanged. The emulated NIC consumes a UAR register with an
// atomic swap; the plain store to it is excluded from race instrumentation (go:norace on
// uarStore) because a device register is written by MMIO semantics, not the Go memory model:
// the happens-before edge the device model relies on is the doorbell record's.
func (r *BFReg) RingFast(q *SQ, db DBRec, counter uint32, nreq int, last Posted, inline bool) {
	if nreq == 0 {
		return
	}
	// 1. udma_to_device_barrier: WQE stores before the doorbell record.
	ToDeviceBarrier()
	// 2. The doorbell record (the send counter).
	db.SetSendCounter(counter)
	if r.NeedLock {
		r.lockReg()
	}
	// 3. mmio_wc_start: the record store globally visible before the UAR write.
	WCStart()
	ds := int(last.DS)
	dst := r.base + r.offset
	if !r.ShutUpBF && nreq == 1 && r.index != 0 && (inline || r.PreferBF) && ds > 1 && ds <= r.bufSize/SegSize {
		// 4a. BlueFlame: the WQE in whole 64-byte blocks, 8 bytes at a time in order,
		//     wrapping at the end of the ring (mlx5_bf_copy).
		n := (ds*SegSize + SendWQEBB - 1) / SendWQEBB * SendWQEBB
		from := last.Offset
		for i := 0; i < n; i += 8 {
			if from == len(q.buf) {
				from = 0
			}
			uarStore(r.uar.mem, dst+i, ne.Uint64(q.buf[from:from+8]))
			from += 8
		}
	} else {
		// 4b. The 8-byte doorbell: the first 8 bytes of the control segment.
		uarStore(r.uar.mem, dst, ne.Uint64(q.buf[last.Offset:last.Offset+8]))
	}
	// 5. mmio_flush_writes inside the lock.
	FlushWrites()
	// 6. Alternate halves.
	r.offset ^= r.bufSize
	if r.NeedLock {
		r.unlockReg()
	}
	// 7. Wake an in-process device model that parked (uarwake.go).
	r.uar.poke()
}

// uarStore writes v at the 8-byte aligned offset off of a UAR mapping with one plain 8-byte
// store (mmio_write64_be); see RingFast for why it is plain and not race-instrumented.
//
//go:norace
func uarStore(mem []byte, off int, v uint64) {
	*at64(mem[:off+8], off) = v
}
