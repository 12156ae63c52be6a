package failover

import (
	"fmt"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// decodedWQE is a WQE of the default SQ as read back and decoded (decodedLocked), with the
// local keys inject corrupted restored.
type decodedWQE struct {
	wr     verbs.SendWR
	inline []byte
}

// wqeDecodes keeps what was decoded of the default ring, by position. A WQE's bytes do not
// change while it is outstanding, and a position names one WQE until the SQ is reset
// (provider.QP.SendResets). A round lists the ring up to four times: the key check before
// it starts (remote-address segments only, missingDefRKeysLocked), the retransmission check
// (prepareLocked, which decodes each WQE whole and keeps it here), and after the reply the key
// check and the repost, which read what is kept. A kept pass over the ring took 2.1–3.6 µs
// where a decoding one took 10.7–15.1 µs (about 16 and 6 WQEs, a WRITE and a SEND stream,
// means of 100 passes inside a round of BenchmarkFallbackLatency, a temporary probe of
// 2026-11-30).
type wqeDecodes struct {
	resets uint32 // SendResets when byPos was filled
	byPos  map[uint32]decodedWQE
}

// decodedLocked returns the WQE at pos of the default SQ, decoded, from the cache when it
// holds this incarnation's (q.mu held, the default SQ's gates closed).
func (q *QP) decodedLocked(pos uint32) (decodedWQE, error) {
	if d, ok := q.cachedDecodeLocked(pos); ok {
		return d, nil
	}
	var buf [mlx5.MaxDS * mlx5.SegSize]byte
	n, err := q.def.ReadSendWQE(pos, buf[:])
	if err != nil {
		return decodedWQE{}, fmt.Errorf("failover: QP %#x: read back WQE at %d: %w", q.qpn, pos, err)
	}
	dw, err := provider.DecodeSendWQE(buf[:n])
	if err != nil {
		return decodedWQE{}, fmt.Errorf("failover: QP %#x: WQE at %d: %w", q.qpn, pos, err)
	}
	d := decodedWQE{wr: dw.WR, inline: dw.Inline}
	if d.wr.Flags&verbs.SendInline == 0 {
		for i := range d.wr.SGL {
			if k, ok := q.injKeys[d.wr.SGL[i].LKey]; ok {
				d.wr.SGL[i].LKey = k
			}
		}
	}
	q.wqeDec.byPos[pos] = d
	return d, nil
}

// cachedDecodeLocked returns the WQE at pos as decoded before in this incarnation of the
// default SQ, if it was; a reset since empties the cache.
func (q *QP) cachedDecodeLocked(pos uint32) (decodedWQE, bool) {
	c := &q.wqeDec
	if r := q.def.SendResets(); c.byPos == nil || c.resets != r {
		if c.byPos == nil {
			c.byPos = map[uint32]decodedWQE{}
		}
		clear(c.byPos)
		c.resets = r
	}
	d, ok := c.byPos[pos]
	return d, ok
}
