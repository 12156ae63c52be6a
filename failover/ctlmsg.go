package failover

import (
	"encoding/binary"
	"fmt"
)

// The fallback notification travels on the control QP as a SEND of ctlMsgSize bytes, inline,
// into one of the peer's control receive buffers (ctlDepth slots of a buffer registered on
// the backup device): our receive counter, the number of stale receives on our backup QP
// that the peer's fillers must consume, and a magic word. It used to be the 32-bit immediate
// of a WRITE_WITH_IMM, which left 8 bits for the stale count: an application that keeps more
// than 255 receives posted (perftest's ib_send_bw posts 512) had its second fallback
// refused.
const (
	ctlMsgSize = 16
	ctlMagic   = 0x53484654 // "SHFT"
	// ctlRecvBase + slot is the wr_id of the control receive in that slot.
	ctlRecvBase = 0x5348_4946_545f_5200 // "SHIFT_R" and the slot
)

// ctlMsg is a decoded notification. A fallback started by a local failure has none (the zero
// value).
type ctlMsg struct {
	count uint32 // two-sided WRs received (24-bit serial arithmetic, see delivered)
	stale uint32 // application receives left on the sender's backup QP
	// refused: the sender will not fall back (an unsafe WR of its own outstanding, its KV
	// or backup not ready): the receiver's handshake fails now instead of at its timeout.
	refused bool
}

// ctlFlagRefused is bit 0 of the message's third word (zero in older messages).
const ctlFlagRefused = 1

func (m ctlMsg) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], m.count)
	binary.BigEndian.PutUint32(b[4:], m.stale)
	var flags uint32
	if m.refused {
		flags |= ctlFlagRefused
	}
	binary.BigEndian.PutUint32(b[8:], flags)
	binary.BigEndian.PutUint32(b[12:], ctlMagic)
}

func parseCtlMsg(b []byte) (ctlMsg, error) {
	if len(b) < ctlMsgSize || binary.BigEndian.Uint32(b[12:]) != ctlMagic {
		return ctlMsg{}, fmt.Errorf("failover: control message of %d bytes without its magic word", len(b))
	}
	return ctlMsg{count: binary.BigEndian.Uint32(b[0:]), stale: binary.BigEndian.Uint32(b[4:]),
		refused: binary.BigEndian.Uint32(b[8:])&ctlFlagRefused != 0}, nil
}
