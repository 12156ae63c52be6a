package demo

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider/verbs"
)

const writeTag = 'W'

// writeStream is NCCL's Simple protocol: per message, WriteParts data WRITEs into a slot of
// the receiver's buffer, then a zero-length WRITE_WITH_IMM (the flag) whose immediate is the
// message's sequence number. Slot s of both buffers holds messages s, s+slots, ...
type writeStream struct {
	slots, chunk, parts int
	snd, rcv            Side
	st                  *streamStats
	verified            atomic.Uint64 // messages the receiver verified: the sender's credits
}

func (w *writeStream) slotSize() int { return w.chunk * w.parts }

// sender posts messages while it has credits and ring room, and stops at the first error.
func (w *writeStream) sender(ctx context.Context) {
	wrs := make([]verbs.SendWR, w.parts+1)
	sges := make([]verbs.SGE, w.parts)
	for i := range wrs {
		if i < w.parts {
			wrs[i] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: sges[i : i+1], RKey: w.rcv.RKey()}
		} else {
			wrs[i] = verbs.SendWR{Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, RKey: w.rcv.RKey()}
		}
	}
	var wcs [16]verbs.WC
	var next, completed uint64
	var id idler
	for ctx.Err() == nil {
		n, err := w.snd.Poll(wcs[:])
		if err != nil {
			w.st.fail("sender", "poll: "+err.Error(), verbs.WCSuccess)
			return
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				w.st.fail("sender", fmt.Sprintf("WRITE_WITH_IMM completion %v (wr_id %d)", wc.Status, wc.WRID), wc.Status)
				return
			}
			completed++
		}
		if next-completed >= uint64(w.slots) || next-w.verified.Load() >= uint64(w.slots) {
			if n == 0 {
				id.idle()
			}
			continue
		}
		id.busy()
		off := int(next%uint64(w.slots)) * w.slotSize()
		fillPattern(w.snd.Buf()[off:off+w.slotSize()], writeTag, next)
		for p := range w.parts {
			o := off + p*w.chunk
			sges[p] = verbs.SGE{Addr: w.snd.Addr() + uint64(o), Length: uint32(w.chunk), LKey: w.snd.LKey()}
			wrs[p].RemoteAddr = w.rcv.Addr() + uint64(o)
			wrs[p].WRID = next<<8 | uint64(p)
		}
		flag := &wrs[w.parts]
		flag.WRID, flag.Imm, flag.RemoteAddr = next<<8|0xff, uint32(next), w.rcv.Addr()+uint64(off)
		if err := w.snd.PostSend(wrs); err != nil {
			w.st.fail("sender", "post_send: "+err.Error(), verbs.WCSuccess)
			return
		}
		next++
	}
}

// receiver checks each slot when its flag arrives: the flags come in order, each names the
// next message, and the slot holds exactly that message's bytes.
func (w *writeStream) receiver(ctx context.Context) {
	recv := []verbs.RecvWR{{}}
	for range 2 * w.slots {
		if err := w.rcv.PostRecv(recv); err != nil {
			w.st.fail("receiver", "post_recv: "+err.Error(), verbs.WCSuccess)
			return
		}
	}
	var expect uint64
	receiveLoop(ctx, w.st, w.rcv, func(wc *verbs.WC) bool {
		if wc.Opcode != verbs.WCRecvRDMAWithImm || wc.Flags&verbs.WCFlagWithImm == 0 {
			w.st.fail("receiver", fmt.Sprintf("flag completion with opcode %v, flags %#x", wc.Opcode, wc.Flags), wc.Status)
			return false
		}
		if wc.Imm != uint32(expect) {
			w.st.fail("receiver", fmt.Sprintf("flag for message %d, expected %d (lost or duplicated flag)", wc.Imm, uint32(expect)), wc.Status)
			return false
		}
		off := int(expect%uint64(w.slots)) * w.slotSize()
		if bad := checkPattern(w.rcv.Buf()[off:off+w.slotSize()], writeTag, expect); bad >= 0 {
			w.st.fail("receiver", fmt.Sprintf("message %d: data wrong at byte %d of its slot when its flag arrived", expect, bad), wc.Status)
			return false
		}
		w.st.verified(w.slotSize())
		expect++
		w.verified.Store(expect)
		if err := w.rcv.PostRecv(recv); err != nil {
			w.st.fail("receiver", "post_recv: "+err.Error(), verbs.WCSuccess)
			return false
		}
		return true
	})
}
