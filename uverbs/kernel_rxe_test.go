package uverbs

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rxeRing is one of rxe's queues shared with the kernel (struct rxe_queue_buf followed by the
// elements), mapped through the command fd at the offset the create response gave.
type rxeRing struct {
	b    []byte
	log2 uint32
	mask uint32
}

var (
	rxeProdOff = 128 // offsetof(struct rxe_queue_buf, producer_index): 32 words in
	rxeConsOff = 256 // offsetof(struct rxe_queue_buf, consumer_index)
	rxeDataOff = sizeOf[RxeQueueBuf]()
)

func mapRxeRing(t *testing.T, f File, mi RxeMmapInfo) *rxeRing {
	t.Helper()
	b, err := f.Mmap(int64(mi.Offset), int(mi.Size))
	if err != nil {
		t.Fatalf("mmap rxe queue at %#x (%d bytes): %v", mi.Offset, mi.Size, err)
	}
	t.Cleanup(func() { f.Munmap(b) })
	h := fromBytes[RxeQueueBuf](b)
	return &rxeRing{b: b, log2: h.Log2_elem_size, mask: h.Index_mask}
}

func (r *rxeRing) u32(off int) uint32       { return binary.NativeEndian.Uint32(r.b[off:]) }
func (r *rxeRing) setU32(off int, v uint32) { binary.NativeEndian.PutUint32(r.b[off:], v) }
func (r *rxeRing) slot(i uint32) []byte {
	return r.b[rxeDataOff+int(i<<r.log2) : rxeDataOff+int((i+1)<<r.log2)]
}

// TestKernelRxeWriteCompletionEvent drives one signaled RDMA WRITE between two RC QPs of the
// rxe device (WQE written into rxe's shared send queue, doorbell by an empty POST_SEND, as
// rdma-core's rxe provider does) with the CQ armed by REQ_NOTIFY_CQ, then reads the real
// kernel's completion event from the channel and the work completion from the CQ ring.
func TestKernelRxeWriteCompletionEvent(t *testing.T) {
	k := openKernel(t)
	if k.driverID != DriverIDRXE {
		t.Skipf("%s: this test posts through rxe's shared queue format", k.info.Name)
	}
	f, id := k.f, k.driverID
	p1, _ := k.info.Port(1)
	g := roceGID(t, p1)

	pd, err := AllocPD(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	access := uint32(AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead)
	mr, err := RegMR(f, RegMRRequest{Start: Addr(mem), Length: uint64(len(mem)), HCAVA: Addr(mem), PD: pd, Access: access}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := CreateCompChannel(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ch) })
	cqOut := make([]byte, sizeOf[RxeCreateCQResp]())
	const cqHandle = 0xfeedc0de
	cq, err := CreateCQ(f, id, CreateCQRequest{CQE: 16, UserHandle: cqHandle, CompChannel: ch, AsyncFD: k.ctx.AsyncFD}, nil, cqOut)
	if err != nil {
		t.Fatal(err)
	}
	cqRing := mapRxeRing(t, f, fromBytes[RxeCreateCQResp](cqOut).Mi)

	req := CreateQPRequest{Type: QPTypeRC, PD: pd, SendCQ: cq.Handle, RecvCQ: cq.Handle,
		Cap: QPCap{Send_wr: 8, Recv_wr: 8, Send_sge: 1, Recv_sge: 1}, AsyncFD: k.ctx.AsyncFD}
	aOut, bOut := make([]byte, sizeOf[RxeCreateQPResp]()), make([]byte, sizeOf[RxeCreateQPResp]())
	qa, err := CreateQP(f, id, req, nil, aOut)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := CreateQP(f, id, req, nil, bOut)
	if err != nil {
		t.Fatal(err)
	}
	sq := mapRxeRing(t, f, fromBytes[RxeCreateQPResp](aOut).Sq_mi)

	var av Path
	copy(av.DGID[:], g.GID.To16())
	av.SGIDIndex, av.HopLimit, av.IsGlobal, av.Port = uint8(g.Index), 64, true, 1
	connect := func(qp QP, dest uint32, rts bool) {
		t.Helper()
		steps := []struct {
			a    QPAttr
			mask uint32
		}{
			{QPAttr{State: QPStateInit, Port: 1, AccessFlags: access}, QPAttrState | QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags},
			{QPAttr{State: QPStateRTR, AV: av, PathMTU: MTU1024, DestQPN: dest, RQPSN: 100, MaxDestRdAtomic: 1, MinRNRTimer: 12},
				QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
		}
		if rts {
			steps = append(steps, struct {
				a    QPAttr
				mask uint32
			}{QPAttr{State: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 100, MaxRdAtomic: 1},
				QPAttrState | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic})
		}
		for _, s := range steps {
			if err := ModifyQP(f, qp.Handle, &s.a, s.mask, nil); err != nil {
				t.Fatalf("modify qpn %#x to state %d: %v", qp.QPN, s.a.State, err)
			}
		}
	}
	connect(qa, qb.QPN, true)
	connect(qb, qa.QPN, false)

	if err := ReqNotifyCQ(f, cq.Handle, false); err != nil {
		t.Fatalf("ReqNotifyCQ: %v", err)
	}
	t.Logf("verified: write REQ_NOTIFY_CQ on CQ %d", cq.Handle)

	src, dst := mem[0:4096], mem[8192:8192+4096]
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	// One struct rxe_send_wqe plus its SGE, written where rxe's provider would put it.
	wqe := RxeSendWQE{Iova: Addr(dst)}
	wqe.Wr.Wr_id = 0x77
	wqe.Wr.Opcode = WROpRDMAWrite
	wqe.Wr.Send_flags = SendFlagSignaled
	binary.NativeEndian.PutUint64(wqe.Wr.Wr[0:], Addr(dst)) // wr.rdma.remote_addr
	binary.NativeEndian.PutUint32(wqe.Wr.Wr[8:], mr.RKey)   // wr.rdma.rkey
	wqe.Dma.Length, wqe.Dma.Resid, wqe.Dma.Num_sge = uint32(len(src)), uint32(len(src)), 1
	sge := RxeSGE{Addr: Addr(src), Length: uint32(len(src)), Lkey: mr.LKey}
	prod := sq.u32(rxeProdOff)
	slot := sq.slot(prod)
	copy(slot, structBytes(&wqe))
	copy(slot[sizeOf[RxeSendWQE]():], structBytes(&sge))
	sq.setU32(rxeProdOff, (prod+1)&sq.mask) // the doorbell syscall below orders this store
	db := PostSendCmd{Qp_handle: qa.Handle, Wqe_size: uint32(sizeOf[SendWR]())}
	var dbResp PostSendResp
	if err := Write(f, CmdPostSend, structBytes(&db), nil, structBytes(&dbResp), nil); err != nil {
		t.Fatalf("POST_SEND doorbell: %v", err)
	}
	t.Logf("verified: RDMA WRITE of 4 KiB posted into rxe's send queue, doorbell by write POST_SEND (wr_count 0)")

	ok, err := WaitReadable(ch, 30*time.Second)
	if err != nil || !ok {
		t.Fatalf("no completion event within 30s (readable %v, err %v)", ok, err)
	}
	ev, err := ReadCompEvent(ch)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Handle != cqHandle {
		t.Errorf("completion event for CQ user handle %#x, want %#x", ev.Handle, cqHandle)
	}
	t.Logf("verified: completion channel delivered struct ib_uverbs_comp_event_desc {cq_handle %#x}", ev.Handle)

	cons := cqRing.u32(rxeConsOff)
	if cqRing.u32(rxeProdOff) == cons {
		t.Fatalf("completion event but the CQ ring is empty")
	}
	wc := fromBytes[WC](cqRing.slot(cons))
	if wc.Wr_id != 0x77 || wc.Status != 0 || wc.Opcode != WCOpRDMAWrite || wc.Qp_num != qa.QPN || !bytes.Equal(src, dst) {
		t.Errorf("wc %+v, data equal %v", wc, bytes.Equal(src, dst))
	}
	cqRing.setU32(rxeConsOff, (cons+1)&cqRing.mask)
	t.Logf("verified: CQE in rxe's ring as struct ib_uverbs_wc: wr_id %#x status %d opcode %d qp %#x; 4 KiB landed", wc.Wr_id, wc.Status, wc.Opcode, wc.Qp_num)

	for _, qp := range []QP{qa, qb} {
		if _, err := DestroyQP(f, id, qp.Handle); err != nil {
			t.Fatal(err)
		}
	}
	r, err := DestroyCQ(f, id, cq.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if r.Comp_events_reported != 1 {
		t.Errorf("CQ_DESTROY reports %d completion events, want 1", r.Comp_events_reported)
	}
	t.Logf("verified: ioctl CQ_DESTROY reports %d completion event", r.Comp_events_reported)
	if err := DeregMR(f, id, mr.Handle); err != nil {
		t.Fatal(err)
	}
	if err := DeallocPD(f, id, pd); err != nil {
		t.Fatal(err)
	}
}
