package failover

import (
	"encoding/binary"
	"fmt"
)

// The fallback notification travels on the shared control QP pair of a backup device
// (ctlep.go) as a SEND of ctlMsgSize bytes, inline, into one of the peer's control receive
// buffers: our receive counter, the number of stale receives our backup QP ever had (the
// peer's fillers consume them: stale.go), flags and incarnation, a magic word, and (since
// version 2, when one control QP pair started to serve every QP between two contexts) the QP
// it is for and the QP it comes from. It used to be the 32-bit immediate of a
// WRITE_WITH_IMM, which left 8 bits for the stale count: an application that keeps more than
// 255 receives posted (perftest's ib_send_bw posts 512) had its second fallback refused.
// Version 3 counts the stale receives since the set's QP was created rather than those left,
// which the receiver could not know while fillers' completions were still to come.
//
//	 0 count | 4 stale | 8 flags (bits 0-2) and incarnation (bits 8-31) | 12 magic "SHFT" |
//	16 version (8 bits) and the receiver's default QPN (24 bits) | 20 the sender's default QPN
//
// Version 1 was the first 16 bytes alone (one control QP pair per QP named the QP); a
// message of any other length, magic or version, with reserved bits set or a QPN out of
// range, is no message and is dropped.
const (
	ctlMsgSize = 24
	ctlMagic   = 0x53484654 // "SHFT"
	ctlVersion = 3
	// ctlRecvBase + slot is the wr_id of the control receive in that slot.
	ctlRecvBase = 0x5348_4946_545f_5200 // "SHIFT_R" and the slot
)

// ctlMsg is a decoded notification. A fallback started by a local failure has none (the zero
// value).
type ctlMsg struct {
	count uint32 // two-sided WRs received (24-bit serial arithmetic, see delivered)
	stale uint32 // application receives ever left stale on the sender's backup QP (stale.go)
	// refused: the sender will not fall back (an unsafe WR of its own outstanding, its KV
	// or backup not ready): the receiver's handshake fails now instead of at its timeout.
	// Without reply it withdraws the sender's own notification, sent before its check
	// failed (withdrawLocked): the receiver's QP fails wherever its round is.
	refused bool
	// reply: the message answers the receiver's notification (it started no round). A reply
	// that finds no notification of ours waiting is a duplicate, resent after the backup it
	// first travelled on failed, and is dropped.
	reply bool
	// pinned: the sender's QP was moved by SwitchToBackup (active switching: its default
	// path straggles) and stays on the backup until SwitchToDefault; the receiver keeps its
	// own sends there too, without probing, until the sender's recovery notification.
	pinned bool
	// recvOnly: the sender's application never moved its QP to RTS (perftest's bandwidth
	// servers): it sends no recovery notification on its default QP, so the receiver's reset
	// posts no control RECV for one (recvonly.go).
	recvOnly bool
	// neverSent: the sender is such a QP, never sent, and its receive side has just come
	// back: its send side returned too, without a probe or fence, and the receiver's receive
	// side may follow. Not a round.
	neverSent bool
	// gen is the sender's default QP incarnation (modulo 2^24): for a reply the incarnation
	// both sides take in this round, otherwise the sender's before the round. It keeps the
	// two counts equal when a notification or its reply was lost with a failed backup
	// (adoptGen).
	gen uint32
	// dst is the receiver's default QPN (the QP the message is for), src the sender's: the
	// control QP pair is shared by every QP between two contexts (ctlep.go), and the
	// receiver acts only on its QP dst whose peer is src on the same pair.
	dst, src uint32
}

// Flags of the message's third word: bit 0 refused, bit 1 reply, bit 2 pinned, bit 3 never
// sent, bit 4 receive-only, bits 5-7 reserved (zero), bits 8-31 the incarnation.
const (
	ctlFlagRefused   = 1
	ctlFlagReply     = 2
	ctlFlagPinned    = 4
	ctlFlagNeverSent = 8
	ctlFlagRecvOnly  = 16
	ctlFlagReserved  = 0xe0
	ctlGenShift      = 8
)

func (m ctlMsg) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], m.count)
	binary.BigEndian.PutUint32(b[4:], m.stale)
	var flags uint32
	if m.refused {
		flags |= ctlFlagRefused
	}
	if m.reply {
		flags |= ctlFlagReply
	}
	if m.pinned {
		flags |= ctlFlagPinned
	}
	if m.neverSent {
		flags |= ctlFlagNeverSent
	}
	if m.recvOnly {
		flags |= ctlFlagRecvOnly
	}
	flags |= m.gen << ctlGenShift
	binary.BigEndian.PutUint32(b[8:], flags)
	binary.BigEndian.PutUint32(b[12:], ctlMagic)
	binary.BigEndian.PutUint32(b[16:], ctlVersion<<24|m.dst&psnMask)
	binary.BigEndian.PutUint32(b[20:], m.src&psnMask)
}

func parseCtlMsg(b []byte) (ctlMsg, error) {
	if len(b) != ctlMsgSize || binary.BigEndian.Uint32(b[12:]) != ctlMagic {
		return ctlMsg{}, fmt.Errorf("failover: control message of %d bytes without its magic word", len(b))
	}
	flags, to, src := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])
	switch dst := to & psnMask; {
	case to>>24 != ctlVersion:
		return ctlMsg{}, fmt.Errorf("failover: control message of version %d, want %d", to>>24, ctlVersion)
	case flags&ctlFlagReserved != 0:
		return ctlMsg{}, fmt.Errorf("failover: control message with reserved flags %#x", flags&ctlFlagReserved)
	case !validQPN(dst) || !validQPN(src):
		return ctlMsg{}, fmt.Errorf("failover: control message from QP %#x to QP %#x", src, dst)
	}
	return ctlMsg{count: binary.BigEndian.Uint32(b[0:]), stale: binary.BigEndian.Uint32(b[4:]),
		refused: flags&ctlFlagRefused != 0, reply: flags&ctlFlagReply != 0,
		pinned: flags&ctlFlagPinned != 0, neverSent: flags&ctlFlagNeverSent != 0,
		recvOnly: flags&ctlFlagRecvOnly != 0, gen: flags >> ctlGenShift,
		dst: to & psnMask, src: src}, nil
}

// genAhead reports whether gen is ahead of own (24-bit serial arithmetic).
func genAhead(own uint64, gen uint32) bool {
	return int32((gen-uint32(own))<<ctlGenShift)>>ctlGenShift > 0
}

// genAfter is the incarnation own advanced to the message's gen when that is ahead of it
// (24-bit serial arithmetic), else own.
func genAfter(own uint64, gen uint32) uint64 {
	d := int32((gen-uint32(own))<<ctlGenShift) >> ctlGenShift
	if d > 0 {
		return own + uint64(d)
	}
	return own
}
