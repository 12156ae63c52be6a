package demo

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider/verbs"
)

const sendTag = 'S'

// sendStream is SEND/RECV with sequence numbers: message m's first 8 bytes are m, the rest
// its pattern. The receiver keeps slots receives posted (one per slot of its buffer, wr_id =
// slot) and reposts each after checking it, so receives are consumed, and reposted, in order.
type sendStream struct {
	slots, size int
	snd, rcv    Side
	st          *streamStats
	reposted    atomic.Uint64 // receives reposted after a verified message: the sender's credits
}

func (s *sendStream) sender(ctx context.Context) {
	sge := make([]verbs.SGE, 1)
	wr := []verbs.SendWR{{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: sge}}
	var wcs [16]verbs.WC
	var next, completed uint64
	var id idler
	for ctx.Err() == nil {
		n, err := s.snd.Poll(wcs[:])
		if err != nil {
			s.st.fail("sender", "poll: "+err.Error(), verbs.WCSuccess)
			return
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				s.st.fail("sender", fmt.Sprintf("SEND completion %v (wr_id %d)", wc.Status, wc.WRID), wc.Status)
				return
			}
			completed++
		}
		// Slot reuse needs the slot's SEND completed; a new SEND needs a receive posted.
		if next-completed >= uint64(s.slots) || next >= s.reposted.Load()+uint64(s.slots) {
			if n == 0 {
				id.idle()
			}
			continue
		}
		id.busy()
		off := int(next%uint64(s.slots)) * s.size
		b := s.snd.Buf()[off : off+s.size]
		binary.LittleEndian.PutUint64(b, next)
		fillPattern(b[8:], sendTag, next)
		sge[0] = verbs.SGE{Addr: s.snd.Addr() + uint64(off), Length: uint32(s.size), LKey: s.snd.LKey()}
		wr[0].WRID = next
		if err := s.snd.PostSend(wr); err != nil {
			s.st.fail("sender", "post_send: "+err.Error(), verbs.WCSuccess)
			return
		}
		next++
	}
}

func (s *sendStream) receiver(ctx context.Context) {
	sge := make([]verbs.SGE, 1)
	wr := []verbs.RecvWR{{SGL: sge}}
	post := func(slot int) error {
		sge[0] = verbs.SGE{Addr: s.rcv.Addr() + uint64(slot*s.size), Length: uint32(s.size), LKey: s.rcv.LKey()}
		wr[0].WRID = uint64(slot)
		return s.rcv.PostRecv(wr)
	}
	for i := range s.slots {
		if err := post(i); err != nil {
			s.st.fail("receiver", "post_recv: "+err.Error(), verbs.WCSuccess)
			return
		}
	}
	var expect uint64
	receiveLoop(ctx, s.st, s.rcv, func(wc *verbs.WC) bool {
		slot := int(wc.WRID)
		if wc.Opcode != verbs.WCRecv || slot >= s.slots || slot != int(expect%uint64(s.slots)) || wc.ByteLen != uint32(s.size) {
			s.st.fail("receiver", fmt.Sprintf("receive completion opcode %v wr_id %d byte_len %d, expected RECV in slot %d of %d bytes",
				wc.Opcode, wc.WRID, wc.ByteLen, expect%uint64(s.slots), s.size), wc.Status)
			return false
		}
		b := s.rcv.Buf()[slot*s.size : (slot+1)*s.size]
		if got := binary.LittleEndian.Uint64(b); got != expect {
			s.st.fail("receiver", fmt.Sprintf("message %d arrived, expected %d (not exactly once, in order)", got, expect), wc.Status)
			return false
		}
		if bad := checkPattern(b[8:], sendTag, expect); bad >= 0 {
			s.st.fail("receiver", fmt.Sprintf("message %d: data wrong at byte %d", expect, bad+8), wc.Status)
			return false
		}
		s.st.verified(s.size)
		expect++
		if err := post(slot); err != nil {
			s.st.fail("receiver", "post_recv: "+err.Error(), verbs.WCSuccess)
			return false
		}
		s.reposted.Add(1)
		return true
	})
}
